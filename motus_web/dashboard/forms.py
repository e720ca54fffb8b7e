from typing import Any

from django import forms
from django.conf import settings
from django.contrib.humanize.templatetags.humanize import intcomma
from django.core.files.uploadedfile import UploadedFile
from django.template.defaultfilters import filesizeformat

from motus_web.sessions.limits import (
    REPLAY_THRESHOLD_MAX,
    REPLAY_THRESHOLD_MIN,
    validate_replay_threshold,
)


class ImportForm(forms.Form):
    file = forms.FileField()
    replay = forms.BooleanField(
        required=False,
        label="Replay through compaction",
        help_text="Run chat transcripts through the memory so that compaction events appear.",
    )
    threshold = forms.IntegerField(
        validators=[validate_replay_threshold],
        widget=forms.NumberInput(attrs={"min": REPLAY_THRESHOLD_MIN, "max": REPLAY_THRESHOLD_MAX}),
        initial=settings.MOTUS_REPLAY_THRESHOLD,
        label="Token threshold",
        help_text=(
            f"Context size, in tokens, at which a replay compacts "
            f"({intcomma(REPLAY_THRESHOLD_MIN)} to {intcomma(REPLAY_THRESHOLD_MAX)})."
        ),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["file"].help_text = (
            "A file in one of the formats listed below; "
            f"up to {filesizeformat(settings.MOTUS_UPLOAD_MAX_BYTES)}."
        )

    def clean_file(self) -> UploadedFile:
        upload: UploadedFile = self.cleaned_data["file"]
        limit = settings.MOTUS_UPLOAD_MAX_BYTES
        if upload.size is not None and upload.size > limit:
            raise forms.ValidationError(
                f"The file is {filesizeformat(upload.size)}; the limit is {filesizeformat(limit)}."
            )
        return upload


class RestoreForm(forms.Form):
    file = forms.FileField(
        help_text="A Motus JSONL log. The new session starts from the context restoring it gives."
    )

    def clean_file(self) -> UploadedFile:
        upload: UploadedFile = self.cleaned_data["file"]
        limit = settings.MOTUS_UPLOAD_MAX_BYTES
        if upload.size is not None and upload.size > limit:
            raise forms.ValidationError(
                f"The file is {filesizeformat(upload.size)}; the limit is {filesizeformat(limit)}."
            )
        return upload
