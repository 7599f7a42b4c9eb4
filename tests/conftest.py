import pytest


@pytest.fixture
def cli(capsys):
    """Run `llmbench ARGV...` in process through llmbench.cli.main: (exit code, stdout, stderr)."""
    from llmbench.cli import main

    def run(*argv):
        code = 0
        try:
            main(list(argv))
        except SystemExit as e:
            code = e.code
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
