#!/usr/bin/env python3
"""ctest (tests/package/CMakeLists.txt): the Python module `vla`, imported from the build (PYTHONPATH) in a
scratch folder outside the source tree. Environment: PYTHONPATH (the folder holding the module),
VLA_EXECUTABLE (the `vla` command line, for the cross-check with `vla layer-forward`).

Each test says what would be wrong if it failed. Tolerances come from double's unit roundoff u = 2^-53.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import vla

U = 2.0 ** -53  # double's unit roundoff
T, D_MODEL, D_HEAD = 16, 8, 4


def random_layer(rng, mixer="vla"):
    """Weights of a single-head layer as the layer-forward contract names them, N(0, 1/fan_in), and X (T, d_model)."""
    w = {
        "Wq": rng.normal(0, D_MODEL ** -0.5, (D_HEAD, D_MODEL)),
        "Wk": rng.normal(0, D_MODEL ** -0.5, (D_HEAD, D_MODEL)),
        "Wv": rng.normal(0, D_MODEL ** -0.5, (D_HEAD, D_MODEL)),
        "Wo": rng.normal(0, D_HEAD ** -0.5, (D_MODEL, D_HEAD)),
        "bq": rng.normal(0, 0.1, D_HEAD),
    }
    if mixer.startswith("vla"):
        w["Wu"] = rng.normal(0, D_HEAD ** -0.5, (D_HEAD, D_HEAD))
    if mixer == "deltanet":
        w["Wg"] = rng.normal(0, D_MODEL ** -0.5, (1, D_MODEL))
    return w, rng.normal(0, 1, (T, D_MODEL))


def max_rel(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


class Module(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(7)
        self.scratch = tempfile.TemporaryDirectory(prefix="vla-python-test-")
        os.chdir(self.scratch.name)

    def tearDown(self):
        os.chdir("/")
        self.scratch.cleanup()

    def test_imported_from_pythonpath(self):
        """Otherwise the test would check some other copy of the module than the one just built."""
        where = os.path.dirname(os.path.abspath(vla.__file__))
        self.assertIn(where, [os.path.abspath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep)])
        self.assertIn("vla", vla.mixers)
        self.assertIn("mp50", vla.precisions)

    def test_layer_forward_double_against_mp50(self):
        """The double layer must agree with the 50-digit ground truth to rounding: T steps of O(d_model)
        operations each, T * d_model * u (1.4e-14) times a small constant. Larger: the module passes the
        wrong weights or precision, or double lost accuracy."""
        w, x = random_layer(self.rng)
        y = vla.layer_forward(x, w, mixer="vla", precision="double")
        y_mp50 = vla.layer_forward(x, w, mixer="vla", precision="mp50")
        self.assertEqual(y.shape, (T, D_MODEL))
        err = max_rel(y, y_mp50)
        self.assertLess(err, 16 * T * D_MODEL * U)
        self.assertGreater(err, 0.0)  # double is not mp50: an exact 0 would mean both ran the same precision

    def test_layer_forward_equals_the_command_line(self):
        """The module and `vla layer-forward` run the same code on the same doubles: bit for bit the same
        output and trace, for a VLA layer and a gated DeltaNet layer with a knob set. A difference means
        the module reads the weights, the input or the knobs differently from the contract."""
        for mixer, knobs in (("vla", {"lambda0": 0.5, "refresh_period": 5}), ("deltanet", {})):
            w, x = random_layer(self.rng, mixer)
            params = os.path.join(mixer, "params")
            os.makedirs(params)
            for name, a in w.items():
                np.save(os.path.join(params, name + ".npy"), a)
            np.save(os.path.join(mixer, "X.npy"), x)
            flags = [f"--{k.replace('_', '-')}" for k in knobs]
            argv = [os.environ["VLA_EXECUTABLE"], "layer-forward", "--mixer", mixer, "--params", params,
                    "--input", os.path.join(mixer, "X.npy"), "--output", os.path.join(mixer, "Y.npy"),
                    "--trace", os.path.join(mixer, "trace.csv")]
            for flag, value in zip(flags, knobs.values()):
                argv += [flag, str(value)]
            subprocess.run(argv, check=True, capture_output=True)
            y, trace = vla.layer_forward(x, w, mixer=mixer, trace=True, **knobs)
            np.testing.assert_array_equal(y, np.load(os.path.join(mixer, "Y.npy")))
            cli_trace = np.genfromtxt(os.path.join(mixer, "trace.csv"), delimiter=",", names=True)
            for column in ("S_fro", "A_fro", "delta", "e_norm"):
                np.testing.assert_array_equal(trace[column], cli_trace[column], err_msg=f"{mixer} {column}")

    def test_rule_steps_equal_the_layer(self):
        """The rule's steps on the layer's own projections, times W_o, are the layer's output; and double
        agrees with mp50 to rounding. numpy and Eigen sum the projections in different orders, so the two
        agree to rounding, not bit for bit. A larger difference: the module passes q, k, v or u transposed,
        shifted by a token, or in the wrong order."""
        w, x = random_layer(self.rng)
        q, k, v = x @ w["Wq"].T + w["bq"], x @ w["Wk"].T, x @ w["Wv"].T
        u = k @ w["Wu"].T  # Alg. 1 line 10 reads W_u k_raw
        steps = vla.rule_steps(q, k, v, mixer="vla", u=u)
        self.assertEqual(steps["out"].shape, (T, D_HEAD))
        self.assertEqual(steps["S"].shape, (T, D_HEAD, D_HEAD))
        self.assertEqual(steps["first_nonfinite"], 0)
        self.assertTrue(np.all(steps["A_min_eig"] > 0))  # A_t stays positive definite on this short run
        y = vla.layer_forward(x, w, mixer="vla")
        self.assertLess(max_rel(steps["out"] @ w["Wo"].T, y), 16 * T * D_MODEL * U)
        mp50 = vla.rule_steps(q, k, v, mixer="vla", precision="mp50", u=u)
        self.assertLess(max_rel(steps["out"], mp50["out"]), 16 * T * D_HEAD * U)

    def test_recovery(self):
        """Orthonormal keys are recovered exactly by the pure delta rule (ungated DeltaNet) and by least
        squares: to mp50's resolution in mp50 and to rounding in double. Otherwise keys or values reach the
        analysis transposed, or the knob deltanet_gated is lost."""
        keys = vla.make_keys("orthonormal", d_head=8, n=6)
        np.testing.assert_array_equal(keys, np.eye(8)[:6])
        values = self.rng.normal(0, 1, (6, 8))
        self.assertLess(vla.recovery_error(keys, values, mixer="deltanet", precision="mp50", deltanet_gated=False), 1e-45)
        self.assertLess(vla.recovery_error(keys, values, mixer="deltanet", deltanet_gated=False), 64 * U)
        self.assertLess(vla.least_squares_recovery_error(keys, values), 64 * U)
        self.assertLess(vla.least_squares_recovery_error(keys, values, precision="mp50"), 1e-45)

    def test_jacobian_and_norms(self):
        """The analyses' results arrive whole: every series, of the lengths asked for, and the Jacobian's
        three norms agree (analysis/jacobian.hpp; they differ only by rounding in double)."""
        series = vla.jacobian(mixers=["vla", "vla-v2"], d_heads=[8], T=30, check_steps=5, product_T=10)
        self.assertEqual([(s["mixer"], s["d_head"]) for s in series], [("vla", 8), ("vla-v2", 8)])
        for s in series:
            self.assertEqual((len(s["closed"]), len(s["svd"]), len(s["product"])), (30, 5, 10))
            self.assertLess(s["max_rel_disagreement"], 1e-8)
        norms = vla.state_norms(mixers=["linear", "vla"], T=20, d_head=8, seeds=[1, 2])
        self.assertEqual([(n["mixer"], n["seed"]) for n in norms], [("linear", 1), ("linear", 2), ("vla", 1), ("vla", 2)])
        self.assertTrue(np.all(np.isnan(norms[0]["A_fro"])))  # linear attention has no A_t
        self.assertTrue(np.all(np.isfinite(norms[2]["A_fro"])))

    def test_claim_equals_the_command_line(self):
        """A claim run through the module gives the verdict and measured values `vla claims --quick --only`
        gives: otherwise the module reports something other than the ledger. (Remark 1's claim: 0.02 s.)"""
        claim = "remark1-reduction"
        self.assertIn(claim, vla.claim_ids())
        r = vla.run_claim(claim, out_dir="module")
        subprocess.run([os.environ["VLA_EXECUTABLE"], "claims", "--quick", "--only", claim, "--out", "cli",
                        "--json", "cli/claims.json"], check=True, capture_output=True)
        with open("cli/claims.json") as f:
            cli = next(c for c in json.load(f)["claims"] if c["id"] == claim)
        self.assertIn(r["verdict"], ("holds", "fails", "partial"))
        self.assertEqual((r["verdict"], r["measured"]), (cli["verdict"], cli["measured"]))
        self.assertGreater(r["seconds"], 0.0)  # measured now, not read from a file

    def test_errors_name_the_parameter(self):
        """Bad input raises ValueError naming the parameter (a user must see what to fix), and a run that
        leaves double's range raises vla.NonFiniteError, never a finite wrong answer."""
        w, x = random_layer(self.rng)
        cases = [
            ("mixer", lambda: vla.layer_forward(x, w, mixer="mamba")),
            ("precision", lambda: vla.layer_forward(x, w, precision="fp8")),
            ("lambda0", lambda: vla.layer_forward(x, w, lambda0=0.0)),
            ("lambda0", lambda: vla.layer_forward(x, w, lambda0="big")),
            ("delta_policy", lambda: vla.layer_forward(x, w, delta_policy="sometimes")),
            ("lamda0", lambda: vla.layer_forward(x, w, lamda0=0.1)),
            ("Wk", lambda: vla.layer_forward(x, {n: a for n, a in w.items() if n != "Wk"})),
            ("Wo", lambda: vla.layer_forward(x, {**w, "Wo": w["Wo"][:, :2]})),
            ("wq", lambda: vla.layer_forward(x, {**w, "wq": w["Wq"]})),
            ("x", lambda: vla.layer_forward(x[0], w)),
            ("x", lambda: vla.layer_forward(np.where(x > 1, np.nan, x), w)),
            ("u", lambda: vla.rule_steps(x[:, :4], x[:, :4], x[:, :4], mixer="vla")),
            ("k", lambda: vla.rule_steps(x[:, :4], x[:, :3], x[:, :4], mixer="linear")),
            ("--only", lambda: vla.run_claim("no-such-claim", out_dir="module")),
        ]
        for name, call in cases:
            with self.assertRaises(ValueError, msg=name) as e:
                call()
            self.assertIn(name, str(e.exception))
        with self.assertRaises(vla.NonFiniteError) as e:
            vla.layer_forward(x * 1e300, w, precision="double")
        self.assertIsInstance(e.exception, ArithmeticError)
        self.assertIn("non-finite value", str(e.exception))
        self.assertIn("in double", str(e.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)
