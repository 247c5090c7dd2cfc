"""Recovery: nothing a dead worker held stays stranded.  The sweeper (:mod:`.sweeper`)
re-dispatches and re-drives partitions, requeues by-name requests no live worker holds
(:mod:`.request_leases`) and deletes the spool files of ended jobs (:mod:`.spool`)."""
