"""File locks between runs: an exclusive lock waits for its holder, and `wait=False` says at once that the lock
is held elsewhere (how a run picks the trajectory shards that nobody is computing)."""
import threading

from lotlib.storage.locks import file_lock


def test_a_lock_held_elsewhere_is_not_waited_for_when_asked(tmp_path):
    path = tmp_path / "shard.lock"
    with file_lock(path) as held:
        assert held
        with file_lock(path, wait=False) as other:  # a second open file: another holder, as another run is
            assert other is False
    with file_lock(path, wait=False) as again:
        assert again is True


def test_a_waiting_lock_is_taken_once_its_holder_lets_go(tmp_path):
    path, order = tmp_path / "shard.lock", []
    taken = threading.Event()

    def second():
        taken.wait()
        with file_lock(path):
            order.append("second")

    thread = threading.Thread(target=second)
    with file_lock(path):
        thread.start()
        taken.set()
        thread.join(timeout=0.5)  # still waiting: the lock is held here
        order.append("first")
    thread.join(timeout=10)
    assert order == ["first", "second"] and not thread.is_alive()
