"""The models the end-to-end tests and the benchmarks export and run."""
