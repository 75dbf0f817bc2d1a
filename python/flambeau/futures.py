"""flambeau.futures.Future (as torch.futures.Future, for CPU work): a value that a wait()
produces once, e.g. the result of an async collective. then(callback) chains: the callback
gets the finished future and its return value becomes the new future's value."""

__all__ = ["Future"]

_UNSET = object()


class Future:
    def __init__(self, wait_fn=None):
        """wait_fn() blocks until the value is there and returns it (None: set_result gives it)."""
        self._wait_fn = wait_fn
        self._value = _UNSET
        self._error = None

    def done(self):
        return self._value is not _UNSET or self._error is not None

    def set_result(self, result):
        if self.done():
            raise RuntimeError("[Future.set_result] the future already has a value")
        self._value = result

    def set_exception(self, error):
        if self.done():
            raise RuntimeError("[Future.set_exception] the future already has a value")
        self._error = error

    def wait(self):
        if not self.done():
            if self._wait_fn is None:
                raise RuntimeError("[Future.wait] nothing will complete this future (no wait function, "
                                   "no set_result)")
            try:
                self._value = self._wait_fn()
            except Exception as e:  # noqa: BLE001 - kept and re-raised to every waiter
                self._error = e
        if self._error is not None:
            raise self._error
        return self._value

    def value(self):
        return self.wait()

    def then(self, callback):
        return Future(lambda: (self.wait(), callback(self))[1])
