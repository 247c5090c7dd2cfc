"""The Celery task names, defined once: tasks.py registers them, celery_app.py routes them,
wire.py and messages.py build their messages, the client and the sweeper's request leases
send and recognise them.  Stable: services without this package send them by name."""

TASK_SUBMIT = "cuzk.submit"
TASK_SYNTHESIZE = "cuzk.synthesize"
TASK_PROVE_START = "cuzk.prove_start"
TASK_FINALIZE = "cuzk.finalize"
TASK_STATUS = "cuzk.status"
TASK_RESULT = "cuzk.result"
#: The stage tasks, whose messages name one partition attempt (wire.stage_partition reads them).
STAGE_TASKS = (TASK_SYNTHESIZE, TASK_PROVE_START, TASK_FINALIZE)
#: The by-name requests, which name no partition (their lease: cuzk_tasks/request_leases.py).
REQUEST_TASKS = (TASK_SUBMIT, TASK_STATUS, TASK_RESULT)
