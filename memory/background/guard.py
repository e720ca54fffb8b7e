"""A memory is data, never instructions: what of a memory's text is neutralised or flagged.

A memory is placed in the system message, the most trusted place of a
request, so its text must never be able to close the recalled block, open
another, or speak as a role. Two rules, applied by the store on the way in
and by the block on the way out (a store written before them, or by another
program, is read through the same rule):

- ``neutralise``: the text as one line in which no tag, chat-template token or
  role marker can form: ``<`` and ``>`` become U+2039 and U+203A (single angle quotation marks) (so
  ``</long_term_memory>``, ``</system>``, ``<|im_start|>`` are only words),
  ``[INST]``-style brackets become parentheses, a role label (``SYSTEM:``,
  ``Assistant:``, ``### Instruction:``) loses what makes it one, and line
  breaks collapse, so nothing starts a line of its own.
- ``instruction_reason``: why a text reads as an instruction aimed at the
  model rather than something about the user, or ``None``. The patterns are
  the families of the published prompt-injection corpora: OWASP LLM01
  (https://genai.owasp.org/llmrisk/llm01-prompt-injection/), PromptInject
  (Perez and Ribeiro, 2022, "Ignore previous prompt"), garak's ``dan`` and
  ``promptinject`` probes, and the role-spoofing of chat templates (ChatML,
  Llama's ``[INST]``/``<<SYS>>``, Alpaca's ``### Instruction``), in English and
  the most common translations of "ignore the previous instructions".

The extractors leave such sentences out; the store keeps what still reaches
it as ``flagged`` (never searched, so never placed in a request), shown as
such on the Memories page.
"""

from __future__ import annotations

import re

_ANGLE = str.maketrans({"<": "\u2039", ">": "\u203a"})
_SQUARE_ROLE = re.compile(r"\[\s*(/?\s*(?:INST|SYS|SYSTEM|USER|ASSISTANT))\s*\]", re.I)
_ROLES = (
    r"system|assistant|user|developer|human|ai|model|bot|instruction|instructions|response|"
    r"input|context|tool|function"
)
# A role label where a chat template would put one: at the start, or after a
# sentence end, a delimiter or a (markdown) heading mark.
_ROLE_LABEL = re.compile(
    rf"(^|[.!?\u2039\u203a)\]|*_`]\s*|#+\s*)\b({_ROLES})\s*:", re.I | re.MULTILINE
)
_HEADING = re.compile(r"(^|\s)#{1,6}(?=\s*\w)")

_IGNORE_VERBS = r"ignore|disregard|forget|skip|override|bypass|drop|discard|abandon|neglect"
_PRIOR = r"previous|prior|above|earlier|preceding|initial|original|all|any|your"
_RULES = (
    r"instructions?|prompts?|rules|directions|directives|guidelines|commands|orders|"
    r"context|constraints|restrictions|policies|programming|system prompt|messages?"
)
_INSTRUCTIONS: tuple[tuple[str, str], ...] = (
    (
        "asks to ignore the instructions",
        rf"\b(?:{_IGNORE_VERBS})\b(?:\W+\w+){{0,4}}?\W+(?:{_PRIOR})\b(?:\W+\w+){{0,3}}?\W+"
        rf"(?:{_RULES})\b",
    ),
    (
        "asks to ignore the instructions",
        r"\b(?:ignore|disregard)\b (?:all |everything |any of )?(?:the |of the )?"
        r"(?:above|previous|prior|preceding)\b",
    ),
    (
        "gives the model new instructions",
        r"\b(?:new|updated|real|actual|revised|override) (?:instructions?|rules|system prompt|"
        r"directives?|task)\s*[:\-]",
    ),
    (
        "asks to reveal the instructions",
        r"\b(?:reveal|print|show|repeat|output|display|leak|tell me|give me|what (?:is|are))\b"
        r"(?:\W+\w+){0,5}?\W+(?:system prompt|system message|(?:initial|hidden|original|secret)"
        r" (?:prompt|instructions)|your (?:instructions|prompt|rules|guidelines))",
    ),
    (
        "changes who the model is",
        r"\byou are (?:now|no longer|free|going to (?:act|pretend|be))\b|\bfrom now on,? "
        r"(?:you|act|respond|answer|reply)\b|\b(?:act|behave|respond) as "
        r"(?:if you|an? (?:unfiltered|unrestricted|uncensored|evil|different))|\bpretend "
        r"(?:to be|you are|that you)\b|\broleplay as\b",
    ),
    (
        "a jailbreak persona",
        r"\b(?:do anything now|developer mode|jailbreak(?:ed|ing)?|god mode)\b",
    ),
    (
        "asks to change its behaviour",
        r"\b(?:you (?:must|should|will|have to) (?:now |always |never |only )?"
        r"(?:obey|comply|follow|ignore|answer|respond|reply|say|output)|"
        r"(?:disable|turn off|remove|bypass) (?:your |the |all )?"
        r"(?:safety|filters?|guardrails|restrictions|content policy|moderation))\b",
    ),
    (
        "speaks as a role",
        rf"(?:^|[\s\u2039<])(?:\|?im_start\|?|\|?im_end\|?|\|?endoftext\|?|\|?eot_id\|?|"
        rf"\|?start_header_id\|?|<</?SYS>>|\[/?INST\])|</?(?:{_ROLES}|s)\s*>|"
        rf"(?:^|[.!?]\s+|#+\s*)[*_`>\s]*(?:system|assistant|developer|instruction)[*_`\s]*:",
    ),
    (
        "asks to ignore the instructions",
        # French, Spanish, Portuguese, Italian, German, Dutch, Russian,
        # Chinese, Japanese: "ignore (all) the previous instructions".
        r"\bignor(?:e[zr]?|a|ar|are|iere|eer)\b.{0,30}\b(?:instructions?|instrucciones|"
        r"instru[cç][oõ]es|istruzioni|anweisungen|instructies|consignes)\b|"
        r"\b(?:vergiss|vergessen sie)\b.{0,30}\b(?:anweisungen|regeln)\b|"
        r"\bolvida\b.{0,30}\binstrucciones\b|\boublie[zr]?\b.{0,30}\b(?:instructions|consignes)\b|"
        r"игнорир\w*.{0,30}инструкци|забудь\w*.{0,30}инструкци|"
        r"忽略.{0,12}(?:指令|指示|说明|提示)|无视.{0,12}(?:指令|指示)|"
        r"(?:以前|前|上記|これまで)の(?:指示|命令).{0,6}(?:無視|忘れ)",
    ),
)
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    *((reason, re.compile(pattern, re.I)) for reason, pattern in _INSTRUCTIONS),
    # Case kept: "DAN" the persona, never Dan the brother.
    ("a jailbreak persona", re.compile(r"\bDAN\b|\bDo Anything Now\b")),
    ("closes the memory block", re.compile(r"</?\s*long_term_memory", re.I)),
)


def neutralise(text: str) -> str:
    """``text`` as one line no tag, template token or role label can be
    formed in (see the module docstring); the words themselves are kept, so
    a person reading the memory sees what was said."""
    text = " ".join(text.translate(_ANGLE).split())
    text = _SQUARE_ROLE.sub(lambda m: f"({m.group(1)})", text)
    text = _ROLE_LABEL.sub(lambda m: f"{m.group(1)}{m.group(2)} -", text)
    return _HEADING.sub(lambda m: m.group(1), text)


def instruction_reason(text: str) -> str | None:
    """Why ``text`` reads as an instruction aimed at the model (``"asks to
    ignore the instructions"``, ``"speaks as a role"``...), or ``None`` when it
    does not. Checked on the text as said (before ``neutralise``)."""
    for reason, pattern in _PATTERNS:
        if pattern.search(text):
            return reason
    return None
