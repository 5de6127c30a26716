"""examples/torch_digits.py end to end (issue 29): sklearn's digits captioned by a plain torch
model trained on 2 pipeline ranks, interrupted after half the steps, resumed from its last
complete checkpoint, its modules loaded back into the single-process model (strict) and
evaluated on the 360 held-out digits: well above chance (measured: 41 % at 40 steps)."""
import os
import re
import subprocess
import sys
import tempfile

from check import check, done

try:
    import sklearn  # noqa: F401  (python3-sklearn, make deps)
except ImportError:
    check("torch_digits_example", False, "python3-sklearn is not installed (make deps)")
    done()
tmp = tempfile.mkdtemp()
r = subprocess.run([sys.executable, "examples/torch_digits.py", "--steps", "40", "--dir", tmp], capture_output=True,
                   text=True, timeout=200)
out = r.stdout
acc = re.search(r"accuracy: untrained ([\d.]+) %, trained ([\d.]+) %", out)
loss = re.search(r"caption loss: untrained ([\d.]+), trained ([\d.]+)", out)
check("torch_digits_example_runs", r.returncode == 0 and "resumed at step 20" in out
      and "roles: vit encoder, llm backbone, denoiser generator" in out, r.stderr[-400:])
check("torch_digits_example_checkpoint_set", sorted(os.listdir(os.path.join(tmp, "step-00000040"))) ==
      ["COMPLETE", "rank-0.pt", "rank-1.pt"] and os.path.exists(os.path.join(tmp, "model.pt")))
check("torch_digits_example_learns", acc is not None and float(acc.group(2)) >= 30.0 and float(acc.group(1)) < 20.0
      and loss is not None and float(loss.group(2)) < 0.6 * float(loss.group(1)), out[-300:])
done()
