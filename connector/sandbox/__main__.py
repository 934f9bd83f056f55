"""``python -m connector.sandbox``: the same as ``pms-sync sandbox``."""

from connector.cli.sandbox_commands import sandbox_command

if __name__ == "__main__":
    sandbox_command(prog_name="python -m connector.sandbox")
