"""The main jobs as a newcomer runs them: the bare commands of the README with an empty compile cache
(`python -m bench.main_job`, __main__.py), what the compile cache saves at start-up (compile_cache.py),
and the best validation the EGG main job reaches in a wall-clock budget (search.py)."""
