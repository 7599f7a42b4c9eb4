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


@pytest.fixture
def one_thread():
    """Torch on one thread for the test: tiny models run fastest so, and on a shared, loaded CPU
    two threads spin-wait on each other (a 12-step MoE training loop: 0.2 s on one thread, 15 s on
    two under load). torch is imported here only by the tests that ask for it."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
