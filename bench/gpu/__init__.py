"""On a GPU node: the plans `bash bench/gpu/run.sh` runs within one command's time (steps.py, run.py, the
estimates of history.py, the archive of bundle.py), where a step's time goes (profile.py), the launch
tuner (tune.py), each goal's predicted range against the figure measured (goal_ranges.py), what a step
asks of the device from the host (host_path.py) and what TF32 products change in the fitness
(tf32_fitness.py)."""
