"""Byte corpora: prepare, open (memory-mapped .bin / HDF5 / Zarr), sample, n-gram baselines."""
