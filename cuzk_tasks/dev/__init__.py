"""Development tools, not used by a running service: ``cuzk-tasks demo`` (:mod:`.demo`) and
a throwaway ``redis-server`` for it and the tests (:mod:`.local_redis`)."""
