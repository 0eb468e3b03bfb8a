"""The CIFAR script of sgsim.torch.experiments.cifar on synthetic CIFAR-shaped data and a narrow ResNet-18.

End to end in the pickled-batch format; missing data named file by file; an interrupted and
resumed run equal to an uninterrupted one bit for bit, with resuming from fresh generators as
the negative control; the paper's schedule (stages, cycle length, collected steps); the
augmentation against a per-image loop; the network's size; bad arguments named.

Skipped as a whole where PyTorch (the ``torch`` extra) is not installed.
"""

import json
import math
import pickle
import shutil
import signal

import numpy as np
import pytest

from sgsim._validate import ParameterError

torch = pytest.importorskip("torch")

from sgsim.schedules import EXPLORATION, SAMPLING  # noqa: E402
from sgsim.torch.experiments import cifar  # noqa: E402
from sgsim.torch.experiments.cifar import CifarConfig, Execution  # noqa: E402

N_TRAIN, N_TEST = 120, 60  # 24 images in each of CIFAR-10's five training batches


def write_cifar(root, dataset="cifar10", n_train=N_TRAIN, n_test=N_TEST, seed=0):
    """Random images and labels in the python version's pickled format; returns the folder."""
    spec = cifar.DATASETS[dataset]
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    sizes = [(name, n_train // len(spec.train)) for name in spec.train] + [(spec.test[0], n_test)]
    for name, n in sizes:
        entry = {
            b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
            spec.label_key: [int(v) for v in rng.integers(0, spec.n_classes, n)],
            b"filenames": [b"x.png"] * n,
        }
        with open(root / name, "wb") as f:
            pickle.dump(entry, f)
    return root


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # the network is tiny: one thread is as fast, and immune to a busy machine's oversubscription
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def data10(tmp_path_factory):
    return write_cifar(tmp_path_factory.mktemp("cifar10"))


# four steps per epoch (120 / 32), two cycles of two epochs per chain, the first half exploring:
# the sampling stage holds the second epoch end of each cycle
TINY = dict(epochs=4, cycles=2, beta=0.5, samples_per_cycle=1, batch_size=32, width=2, seed=3)
QUIET = dict(device="cpu", progress=False, eval_every=2, eval_batch_size=25)


def run(data, out, config, resume=False, **execution):
    return cifar.run(config, data, out, resume=resume, execution=Execution(**{**QUIET, **execution}))


def results(out):
    with open(out / "results.json") as f:
        res = json.load(f)
    for entry in res["history"]:
        del entry["seconds"]
    return {k: res[k] for k in ("bma", "samples", "history", "config", "seed", "data", "schedule", "cost")}


def final_state(out):
    ckpt = torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=True)
    vectors = [torch.load(p, weights_only=True)["vector"] for p in sorted((out / "samples").glob("sample_*.pt"))]
    return ckpt, vectors


def assert_same_run(a, b):
    assert results(a) == results(b)
    (ca, va), (cb, vb) = final_state(a), final_state(b)
    assert len(va) == len(vb) and all(torch.equal(x, y) for x, y in zip(va, vb, strict=True))
    for name in ca["model"]:
        assert torch.equal(ca["model"][name], cb["model"][name]), name
    for i, s in ca["optimizer"]["state"].items():
        assert torch.equal(s["velocity"], cb["optimizer"]["state"][i]["velocity"])
    for name in ca["generators"]:
        assert torch.equal(ca["generators"][name], cb["generators"][name]), name


def same_samples(a, b):
    return all(torch.equal(x, y) for x, y in zip(final_state(a)[1], final_state(b)[1], strict=True))


# --------------------------------------------------------------------------- end to end


@pytest.mark.parametrize("dataset, sampler", [("cifar10", "csghmc"), ("cifar100", "csgld")])
def test_runs_end_to_end(tmp_path, dataset, sampler):
    data = write_cifar(tmp_path / "data" / cifar.DATASETS[dataset].folder, dataset)
    out = tmp_path / "run"
    # the folder above the standard subfolder is accepted too
    code = cifar.main(["--data", str(tmp_path / "data"), "--out", str(out), "--dataset", dataset, "--sampler", sampler,
                       "--epochs", "4", "--cycles", "2", "--beta", "0.5", "--samples-per-cycle", "1",
                       "--batch-size", "32", "--width", "2", "--device", "cpu", "--no-progress", "--eval-every", "1",
                       "--seed", "5"])  # fmt: skip
    assert code == 0
    assert data.is_dir()
    res = json.loads((out / "results.json").read_text())
    assert res["seed"] == 5 and res["config"]["sampler"] == sampler and res["config"]["dataset"] == dataset
    assert res["data"]["n_train"] == N_TRAIN and res["data"]["n_test"] == N_TEST and len(res["data"]["sha256"]) == 64
    bma = res["bma"]
    assert bma["n_samples"] == 2 and 0 <= bma["test_error"] <= 1 and math.isfinite(bma["test_nll"])
    n_classes = cifar.DATASETS[dataset].n_classes
    assert 0 < bma["mean_entropy"] <= math.log(n_classes) + 1e-9
    assert [s["epoch"] for s in res["samples"]] == [2, 4]
    assert all(0 <= s["test_error"] <= 1 for s in res["samples"])
    assert len(res["history"]) == 4 and all("test_error" in h for h in res["history"])
    # a sample carries its batch-norm statistics: its own test NLL in the model average's pass
    # (the network then holding the last epoch's statistics) is the iterate's NLL when it was kept
    for sample in res["samples"]:
        at = res["history"][sample["epoch"] - 1]
        assert sample["test_nll"] == pytest.approx(at["test_nll"], rel=1e-12)
        assert sample["test_error"] == at["test_error"]
    assert res["cost"] == {"epochs_per_chain": 4, "total_epochs": 4}
    assert len(list((out / "samples").glob("sample_*.pt"))) == 2


def test_stages_temperatures_and_samples_of_a_run(tmp_path, data10):
    config = CifarConfig(**{**TINY, "chains": 2, "temperature": 0.5})
    out = tmp_path / "run"
    res = run(data10, out, config)
    assert res["status"] == "finished"
    schedule, spe = cifar.make_schedule(config, N_TRAIN)
    kept = cifar.collection_steps(schedule, spe, config.samples_per_cycle)
    # one sample per cycle and chain, after the steps the plan names, in both chains
    assert [s["step"] for s in res["samples"]] == list(kept + 1) * 2
    assert [s["chain"] for s in res["samples"]] == [0, 0, 1, 1]
    assert [s["cycle"] for s in res["samples"]] == [0, 1, 0, 1]
    # the epoch ends of the exploration stage ran at T = 0, those of the sampling stage at T
    for h in res["history"]:
        assert h["temperature"] == (0.5 if h["stage"] == "sampling" else 0.0)
    assert [h["stage"] for h in res["history"][:4]] == ["exploration", "sampling"] * 2
    # the first step of a cycle runs at alpha0 (on the mean loss)
    assert schedule.block(0, 1).step_size[0] * N_TRAIN == pytest.approx(config.alpha0, rel=1e-15)


def test_exploration_draws_no_noise(tmp_path, data10):
    config = CifarConfig(**TINY)
    out = tmp_path / "run"
    assert run(data10, out, config, stop_after_steps=4)["status"] == "stopped"  # the first epoch: exploration
    ckpt, _ = final_state(out)
    fresh = cifar.chain_generators(config.seed, 0)
    assert torch.equal(ckpt["generators"]["noise"], fresh["noise"].get_state())
    assert not torch.equal(ckpt["generators"]["augment"], fresh["augment"].get_state())
    assert run(data10, out, config, resume=True, stop_after_steps=6)["status"] == "stopped"  # into sampling
    assert not torch.equal(final_state(out)[0]["generators"]["noise"], fresh["noise"].get_state())


# --------------------------------------------------------------------------- resuming


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, data10):
    out = tmp_path_factory.mktemp("whole") / "run"
    assert run(data10, out, CifarConfig(**{**TINY, "chains": 2}))["status"] == "finished"
    return out


def test_interrupted_and_resumed_equals_uninterrupted(tmp_path, data10, uninterrupted):
    config = CifarConfig(**{**TINY, "chains": 2})
    out = tmp_path / "run"
    # stop mid-epoch in a sampling stage, at the end of a chain, mid-epoch in the second chain
    # (checkpointing at every step on the way), then run to the end
    assert run(data10, out, config, stop_after_steps=6) == {"status": "stopped", "steps": 6,
                                                            "reason": "stop_after_steps = 6"}  # fmt: skip
    assert run(data10, out, config, resume=True, stop_after_steps=16)["steps"] == 16
    assert run(data10, out, config, resume=True, stop_after_steps=23, checkpoint_minutes=1e-9)["steps"] == 23
    assert run(data10, out, config, resume=True)["status"] == "finished"
    assert_same_run(out, uninterrupted)
    sessions = json.loads((out / "results.json").read_text())["sessions"]
    assert [s["start_step"] for s in sessions] == [0, 6, 16, 23]
    # resuming a finished run evaluates it again, and changes nothing
    assert run(data10, out, config, resume=True)["status"] == "finished"
    assert_same_run(out, uninterrupted)


def test_sigterm_checkpoints_and_the_resumed_run_is_the_same(tmp_path, data10, uninterrupted, monkeypatch):
    calls = []

    def augment_then_signal(images, generator, padding=4):
        calls.append(1)
        if len(calls) == 10:  # while the tenth step runs
            signal.raise_signal(signal.SIGTERM)
        return cifar_augment(images, generator, padding)

    cifar_augment = cifar.augment
    monkeypatch.setattr(cifar, "augment", augment_then_signal)
    out = tmp_path / "run"
    args = ["--data", str(data10), "--out", str(out), "--epochs", "4", "--cycles", "2", "--beta", "0.5",
            "--samples-per-cycle", "1", "--batch-size", "32", "--width", "2", "--seed", "3", "--chains", "2",
            "--device", "cpu", "--no-progress", "--eval-every", "2", "--eval-batch-size", "25"]  # fmt: skip
    before = signal.getsignal(signal.SIGTERM)
    assert cifar.main(args) == cifar.EXIT_STOPPED
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is put back
    ckpt, _ = final_state(out)
    assert (ckpt["epoch"], ckpt["batch"]) == (2, 2)  # the tenth step was finished, then checkpointed
    monkeypatch.setattr(cifar, "augment", cifar_augment)
    assert cifar.main([*args, "--resume"]) == 0
    assert_same_run(out, uninterrupted)


@pytest.fixture(scope="module")
def stopped(tmp_path_factory, data10):
    """A run stopped mid-epoch in the sampling stage of the first cycle (steps left in every stream)."""
    out = tmp_path_factory.mktemp("stopped") / "run"
    assert run(data10, out, CifarConfig(**{**TINY, "chains": 2}), stop_after_steps=6)["status"] == "stopped"
    return out


def test_resumed_run_from_a_copy_equals_uninterrupted(tmp_path, data10, stopped, uninterrupted):
    out = tmp_path / "run"
    shutil.copytree(stopped, out)
    run(data10, out, CifarConfig(**{**TINY, "chains": 2}), resume=True)
    assert_same_run(out, uninterrupted)


@pytest.mark.parametrize("stream", ["order", "augment", "noise"])
def test_resuming_without_restoring_a_generator_differs(tmp_path, data10, stopped, uninterrupted, stream):
    # negative control: the same resume, with one generator fresh from the seed instead of restored
    out = tmp_path / "run"
    shutil.copytree(stopped, out)
    ckpt = torch.load(out / "checkpoint.pt", weights_only=True)
    ckpt["generators"][stream] = cifar.chain_generators(TINY["seed"], 0)[stream].get_state()
    torch.save(ckpt, out / "checkpoint.pt")
    run(data10, out, CifarConfig(**{**TINY, "chains": 2}), resume=True)
    # the first chain's samples differ (the last chain, and the final model, start afresh)
    assert not same_samples(out, uninterrupted)
    assert results(out)["bma"] != results(uninterrupted)["bma"]


def test_resume_refuses_another_run_and_an_existing_checkpoint(tmp_path, data10, stopped):
    out = tmp_path / "run"
    shutil.copytree(stopped, out)
    with pytest.raises(ParameterError, match="temperature") as info:
        run(data10, out, CifarConfig(**{**TINY, "chains": 2, "temperature": 0.5}), resume=True)
    assert info.value.parameter == "resume"
    with pytest.raises(ParameterError, match="exists") as info:
        run(data10, out, CifarConfig(**{**TINY, "chains": 2}))
    assert info.value.parameter == "resume"


# --------------------------------------------------------------------------- the paper's schedule


@pytest.mark.parametrize("dataset, beta", [("cifar10", None), ("cifar100", None), ("cifar10", 0.9)])
def test_paper_schedule_stages_and_collection(dataset, beta):
    config = CifarConfig(dataset=dataset, beta=beta)
    assert config.beta == (cifar.PAPER_BETA[dataset] if beta is None else beta)
    schedule, spe = cifar.make_schedule(config, 50_000)
    assert spe == 782 and schedule.n_steps == 200 * 782
    length = schedule.description["cycle_length"]
    assert length == 50 * 782 and schedule.n_cycles == 4  # cycles of 50 epochs
    n_sampling = {0.8: 10 * 782, 0.94: 3 * 782, 0.9: 5 * 782}[config.beta]
    for c in range(4):
        stage = schedule.block(c * length, (c + 1) * length).stage
        assert (stage == EXPLORATION).sum() == length - n_sampling and (stage == SAMPLING).sum() == n_sampling
        assert np.all(stage[: length - n_sampling] == EXPLORATION)
    # 3 samples per cycle: the ends of its epochs 48, 49 and 50, as the reference code saves
    kept = cifar.collection_steps(schedule, spe, config.samples_per_cycle)
    assert kept.tolist() == [c * length + e * 782 - 1 for c in range(4) for e in (48, 49, 50)]
    assert np.all(schedule.collect[kept])


def test_collection_needs_enough_epoch_ends_in_a_sampling_stage():
    schedule, spe = cifar.make_schedule(CifarConfig(beta=0.98), 50_000)  # a sampling stage of one epoch
    with pytest.raises(ParameterError, match="cycle 1 has 1 epoch ends") as info:
        cifar.collection_steps(schedule, spe, 3)
    assert info.value.parameter == "samples_per_cycle"
    assert cifar.collection_steps(schedule, spe, 1).size == 4


def test_split_budget_divides_the_epochs():
    config = CifarConfig(epochs=200, chains=4, budget="split", cycles=1)
    assert (config.epochs_per_chain, config.total_epochs) == (50, 200)
    schedule, spe = cifar.make_schedule(config, 50_000)
    assert schedule.n_steps == 50 * spe and schedule.n_cycles == 1
    assert CifarConfig(chains=4).total_epochs == 800  # Table 3's 200/800


# --------------------------------------------------------------------------- data


def test_missing_data_names_the_files(tmp_path):
    with pytest.raises(ParameterError, match="no folder") as info:
        cifar.load_cifar(tmp_path / "nowhere")
    assert info.value.parameter == "data"
    assert "data_batch_1, data_batch_2, data_batch_3, data_batch_4, data_batch_5, test_batch" in str(info.value)
    data = write_cifar(tmp_path / "c10")
    (data / "data_batch_3").unlink()
    (data / "test_batch").unlink()
    with pytest.raises(ParameterError, match="lacks data_batch_3, test_batch; expected") as info:
        cifar.load_cifar(data)
    assert info.value.parameter == "data"
    with pytest.raises(ParameterError, match="lacks train, test; expected the files train, test") as info:
        cifar.load_cifar(tmp_path, "cifar100")
    (tmp_path / "junk").mkdir()
    for name in ("train", "test"):
        (tmp_path / "junk" / name).write_bytes(b"not a pickle")
    with pytest.raises(ParameterError, match="not a pickled CIFAR batch") as info:
        cifar.load_cifar(tmp_path / "junk", "cifar100")
    assert info.value.parameter == "data"


def test_missing_data_on_the_command_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        cifar.main(["--data", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o"), "--device", "cpu"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--data:" in err and "test_batch" in err


def test_load_cifar_reads_the_batches_in_order(tmp_path):
    data = write_cifar(tmp_path / "c10")
    x, y, xt, yt = cifar.load_cifar(data)
    assert x.shape == (N_TRAIN, 3, 32, 32) and x.dtype == torch.uint8 and y.dtype == torch.int64
    assert xt.shape == (N_TEST, 3, 32, 32) and yt.shape == (N_TEST,)
    with open(data / "data_batch_2", "rb") as f:
        second = pickle.load(f, encoding="bytes")
    n = N_TRAIN // 5
    assert np.array_equal(x[n : 2 * n].numpy().reshape(n, -1), second[b"data"])
    assert y[n : 2 * n].tolist() == second[b"labels"]


def test_augment_is_a_padded_crop_then_a_flip():
    images = torch.randint(0, 256, (7, 3, 32, 32), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    out = cifar.augment(images, torch.Generator().manual_seed(11))
    gen = torch.Generator().manual_seed(11)  # the documented draws, replayed
    shifts = torch.randint(0, 9, (7, 2), generator=gen).numpy()
    flips = torch.randint(0, 2, (7,), generator=gen).numpy()
    padded = np.pad(images.numpy(), ((0, 0), (0, 0), (4, 4), (4, 4)))
    for i in range(7):
        dy, dx = shifts[i]
        want = padded[i, :, dy : dy + 32, dx : dx + 32]
        if flips[i]:
            want = want[:, :, ::-1]
        assert np.array_equal(out[i].numpy(), want)
    assert 0 < flips.sum() < 7 and out.dtype == torch.uint8
    x = cifar.normalize(images, torch.tensor([0.5, 0.4, 0.3]), torch.tensor([0.2, 0.25, 0.3]))
    want = (images.double() / 255 - torch.tensor([0.5, 0.4, 0.3]).double().view(1, 3, 1, 1)) / torch.tensor(
        [0.2, 0.25, 0.3]
    ).double().view(1, 3, 1, 1)
    assert x.dtype == torch.float32 and torch.allclose(x.double(), want, rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------- model


def test_resnet18_size_and_seeded_initialisation():
    state = torch.get_rng_state()
    model = cifar.make_resnet18(10, 64, seed=1)
    assert sum(p.numel() for p in model.parameters()) == 11_173_962  # ResNet-18 for CIFAR-10
    assert torch.equal(torch.get_rng_state(), state)  # torch's global generator untouched
    assert sum(p.numel() for p in cifar.ResNet18(100).parameters()) == 11_173_962 + 512 * 90 + 90
    small, again, other = (cifar.make_resnet18(10, 2, seed=s) for s in (1, 1, 2))
    assert all(torch.equal(a, b) for a, b in zip(small.parameters(), again.parameters(), strict=True))
    assert not torch.equal(small.conv1.weight, other.conv1.weight)
    bound = 1 / math.sqrt(3 * 3 * 3)
    assert small.conv1.weight.abs().max() <= bound and bool((small.bn1.weight == 1).all())
    assert small(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "change, parameter",
    [
        (dict(alpha0=0.0), "alpha0"),
        (dict(alpha0=-0.5), "alpha0"),
        (dict(beta=1.0), "beta"),
        (dict(beta=-0.1), "beta"),
        (dict(cycles=0), "cycles"),
        (dict(cycles=300), "cycles"),
        (dict(samples_per_cycle=60), "samples_per_cycle"),
        (dict(friction=0.0), "friction"),
        (dict(temperature=-1.0), "temperature"),
        (dict(epochs=10, chains=4, budget="split"), "epochs"),
        (dict(dataset="mnist"), "dataset"),
        (dict(sampler="sgd"), "sampler"),
    ],
)
def test_bad_settings_name_the_parameter(change, parameter):
    with pytest.raises(ParameterError) as info:
        CifarConfig(**change)
    assert info.value.parameter == parameter


@pytest.mark.parametrize("flag, value", [("--alpha0", "0"), ("--beta", "1"), ("--cycles", "0")])
def test_bad_flags_name_the_flag(tmp_path, capsys, flag, value):
    with pytest.raises(SystemExit) as info:
        cifar.main(["--data", str(tmp_path), "--out", str(tmp_path / "o"), flag, value])
    assert info.value.code == 2
    assert f"{flag}:" in capsys.readouterr().err
