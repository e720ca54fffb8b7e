from django.urls import path

from . import actions, context_edit_pages, long_term, memory_workbench, views

app_name = "dashboard"
_session = "sessions/<str:public_id>/"
urlpatterns = [
    path("", views.session_list, name="session_list"),
    path(_session, views.session_detail, name="session_detail"),
    path(f"{_session}messages/<int:seq>/", views.message_detail, name="message_detail"),
    path(f"{_session}context/", views.session_context, name="session_context"),
    path(f"{_session}comparison/", views.replay_comparison, name="replay_comparison"),
    path(f"{_session}steps/<int:seq>/", views.step_detail, name="step_detail"),
    path(f"{_session}steps/<int:seq>/request.json", views.step_request, name="step_request"),
    path(
        f"{_session}compactions/<int:position>/",
        views.compaction_detail,
        name="compaction_detail",
    ),
    path(f"{_session}trace/", views.session_trace, name="session_trace"),
    path(f"{_session}trace.json", views.session_trace_json, name="session_trace_json"),
    path(f"{_session}export.jsonl", views.export_jsonl, name="export_jsonl"),
    path(f"{_session}export-openai.json", views.export_openai, name="export_openai"),
    # Operator actions: GET asks, POST does.
    path(f"{_session}undo/", actions.undo_confirm, name="undo_confirm"),
    path(f"{_session}undo/do/", actions.undo_compaction, name="undo_compaction"),
    path(
        f"{_session}compactions/<int:position>/restore/",
        actions.restore_confirm,
        name="restore_confirm",
    ),
    path(
        f"{_session}compactions/<int:position>/restore/do/",
        actions.restore_session,
        name="restore_session",
    ),
    path(f"{_session}fork/<int:seq>/", actions.fork_confirm, name="fork_confirm"),
    path(f"{_session}fork/<int:seq>/do/", actions.fork_session, name="fork_session"),
    path(f"{_session}rewind/<int:seq>/", context_edit_pages.rewind_confirm, name="rewind_confirm"),
    path(
        f"{_session}rewind/<int:seq>/do/", context_edit_pages.rewind_session, name="rewind_session"
    ),
    path(
        f"{_session}rewinds/<int:number>/undo/",
        context_edit_pages.undo_rewind_confirm,
        name="undo_rewind_confirm",
    ),
    path(
        f"{_session}rewinds/<int:number>/undo/do/",
        context_edit_pages.undo_rewind,
        name="undo_rewind",
    ),
    path(
        f"{_session}clearings/<int:number>/undo/",
        context_edit_pages.restore_tool_results_confirm,
        name="restore_tool_results_confirm",
    ),
    path(
        f"{_session}clearings/<int:number>/undo/do/",
        context_edit_pages.restore_tool_results,
        name="restore_tool_results",
    ),
    path(
        f"{_session}compactions/<int:position>/rewind/",
        context_edit_pages.rewind_before_confirm,
        name="rewind_before_confirm",
    ),
    path(
        f"{_session}compactions/<int:position>/rewind/do/",
        context_edit_pages.rewind_before,
        name="rewind_before",
    ),
    path(
        f"{_session}compactions/<int:position>/correct/",
        context_edit_pages.correct_summary,
        name="correct_summary",
    ),
    path(f"{_session}compact/", context_edit_pages.compact_now, name="compact_now"),
    path(f"{_session}unpin/", context_edit_pages.unpin, name="unpin"),
    path(f"{_session}delete/", actions.delete_confirm, name="delete_confirm"),
    path(f"{_session}delete/do/", actions.delete_session, name="delete_session"),
    path("import/", views.import_form, name="import_form"),
    path("import/upload/", views.import_upload, name="import_upload"),
    path("import/jobs/<uuid:public_id>/", views.import_job, name="import_job"),
    path("import/jobs/<uuid:public_id>/cancel/", views.import_job_cancel, name="import_job_cancel"),
    path("import/jobs/<uuid:public_id>/retry/", views.import_job_retry, name="import_job_retry"),
    path("memories/", long_term.memory_scopes, name="memory_scopes"),
    # A named scope first: "named" is not a memory id (ids are hexadecimal).
    path(
        "memories/<str:user_id>/named/<str:agent_id>/",
        long_term.memory_scope,
        name="memory_scope_named",
    ),
    path(
        "memories/<str:user_id>/named/<str:agent_id>/add/",
        memory_workbench.memory_add,
        name="memory_add_named",
    ),
    path(
        "memories/<str:user_id>/named/<str:agent_id>/<str:memory_id>/split/",
        memory_workbench.memory_split,
        name="memory_split_named",
    ),
    path(
        "memories/<str:user_id>/named/<str:agent_id>/<str:memory_id>/<str:action>/",
        long_term.memory_action,
        name="memory_action_named",
    ),
    path("memories/<str:user_id>/", long_term.memory_scope, name="memory_scope"),
    path("memories/<str:user_id>/add/", memory_workbench.memory_add, name="memory_add"),
    path(
        "memories/<str:user_id>/<str:memory_id>/split/",
        memory_workbench.memory_split,
        name="memory_split",
    ),
    path(
        "memories/<str:user_id>/<str:memory_id>/<str:action>/",
        long_term.memory_action,
        name="memory_action",
    ),
    path("restore/", actions.restore_upload_form, name="restore_upload_form"),
    path("restore/upload/", actions.restore_upload, name="restore_upload"),
]
