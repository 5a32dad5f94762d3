"""Version control: the only code that runs git (git.py) and what proctor reads from it."""
