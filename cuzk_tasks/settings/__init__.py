"""Settings of the service: every default with its unit (:mod:`.defaults`), the settings a
process runs with (:mod:`.config`: environment variables and/or a TOML file), and Redis
URLs, single server or Sentinel (:mod:`.redis_url`)."""
