"""Attack: outlive the calls inside the child's own process: ignore every signal a polite
stop would send (SIGTERM, SIGHUP, SIGINT, SIGPIPE, and SIGXCPU, the CPU limit's warning),
then spin forever in whatever runs when the child is done: an atexit handler, a finalizer
of a module global, a trace function on the child's main loop returning. Each call answers
at once, so only the end of the child is attacked: it must still end with the grader's
kill, and nothing may be left running."""
import atexit
import signal
import sys


def spin(*_):
    while True:
        pass


for name in ("SIGTERM", "SIGHUP", "SIGINT", "SIGPIPE", "SIGXCPU"):
    try:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    except (OSError, ValueError, RuntimeError):
        pass
atexit.register(spin)


class Lingering:
    def __del__(self):
        spin()


LINGERING = Lingering()


def on_return(frame, event, arg):
    if event == "return" and frame.f_code.co_name == "main":
        spin()
    return on_return


sys.settrace(on_return)
caller = sys._getframe()
while caller is not None and caller.f_code.co_name != "main":    # the child's own loop
    caller = caller.f_back
if caller is not None:
    caller.f_trace = on_return


def kv_bytes_per_token(*args):
    return "outlived"


pages_for = pool_pages = worst_case_pages = check_contract = kv_bytes_per_token
