"""What both UIs (``dashboard`` and ``chat``) show pages with: ``render`` that no
stored text can break (``rendering``) and the wording of figures (``wording``).

Below both UIs and beside ``sessions``: it imports neither UI, so ``chat`` and
``dashboard`` never need to import each other.
"""
