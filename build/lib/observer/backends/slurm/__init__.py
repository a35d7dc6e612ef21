"""The Slurm backend: the scheduler boundary over Slurm's own command-line tools; the only
package that runs them."""
