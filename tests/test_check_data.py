"""noisydml-check-data on generated layouts: counts against the published ones, missing and unreadable
images listed, a missing layout file named."""

from __future__ import annotations

import pytest

import layouts
from noisydml.data.check import PUBLISHED
from noisydml.run.check_data import dataset_check, main

# Each generator with 4 classes (items) x 3 images: how the data set's split divides the 12 images.
GENERATED = {
    "cub": (layouts.make_cub, {"train": 6, "test": 6}),
    "cars196": (layouts.make_cars, {"train": 6, "test": 6}),
    "sop": (layouts.make_sop, {"train": 6, "test": 6}),
    "inshop": (layouts.make_inshop, {"train": 6, "query": 2, "gallery": 4}),
    "flowers102": (layouts.make_flowers, {"images": 12}),
}


@pytest.mark.parametrize("dataset", sorted(GENERATED))
def test_each_layout_is_counted_by_its_published_splits(tmp_path, dataset):
    make, counts = GENERATED[dataset]
    make(tmp_path)
    result = dataset_check(dataset, [f"paths.data_dir={tmp_path}"])
    assert result.counts == counts and set(counts) == set(PUBLISHED[dataset])
    # A generated folder is no published data set: every count differs, and the output says so.
    assert not result.ok and set(result.mismatched) == set(counts)
    assert "NOT as published" in result.text()


def test_missing_and_unreadable_images_are_listed_and_the_exit_status_is_1(tmp_path, capsys):
    root = layouts.make_cub(tmp_path)
    images = sorted((root / "images").rglob("*.jpg"))
    images[0].unlink()
    images[1].write_bytes(b"not a jpeg")
    assert main(["cub", f"paths.data_dir={tmp_path}"]) == 1
    out = capsys.readouterr().out
    assert "train: 6 images (published 5,864)" in out and "test: 6 images (published 5,924)" in out
    assert f"1 missing:\n    {images[0]}" in out
    assert f"1 unreadable:\n    {images[1]} (" in out


def test_a_missing_layout_file_is_named_with_the_layout(tmp_path, capsys):
    root = layouts.make_cars(tmp_path)
    (root / "cars_annos.mat").unlink()
    assert main(["cars196", f"paths.data_dir={tmp_path}"]) == 1
    err = capsys.readouterr().err
    assert "cars_annos.mat not found under dataset.root" in err and "Expected layout" in err


@pytest.mark.slow
def test_cars98n_download_is_checked_against_prisms_link_list(tmp_path, capsys):
    # 4 class folders of 3 images and an error page saved as .jpg, as PRISM's download script leaves them.
    folder = layouts.make_cars98n(tmp_path)
    result = dataset_check("cars98n", [f"paths.data_dir={tmp_path}"])
    assert result.counts == {"train": 13, "train classes": 4, "test": 6}
    (page,) = result.unreadable
    assert page[0].endswith("dead--link.jpg") and result.skips_unreadable
    # Fewer images than links is as published (links die); 4 class folders of 98 and the test split are not.
    assert set(result.mismatched) == {"train classes", "test"}
    assert main(["cars98n", f"paths.data_dir={tmp_path}"]) == 1
    out = capsys.readouterr().out
    assert "train: 13 images (ok, 9,558 links published; dead links expected)" in out
    assert "train classes: 4 (published 98)" in out and "test: 6 images (published 8,131)" in out
    assert f"1 unreadable, skipped by a run:\n    {page[0]}" in out
    # More images than PRISM's list holds is no download of it.
    for k in range(9558):
        (folder / "img_v3" / "0" / f"extra{k}.jpg").touch()
    assert "train" in dataset_check("cars98n", [f"paths.data_dir={tmp_path}"]).mismatched


@pytest.mark.parametrize(
    ("override", "message"),
    [
        # A key it does not read would be taken as checked.
        (
            "noise.rate=0.2",
            "sop: noise.rate=0.2: noisydml-check-data reads the data set's folder, so only its keys",
        ),
        # A key the config lacks: one line naming the closest, as a run's (Hydra printed a traceback).
        (
            "dataset.rot=/data",
            "sop: dataset.rot=/data: dataset has no key rot (dataset=sop); did you mean dataset.root",
        ),
    ],
)
def test_an_override_it_cannot_read_is_refused_in_one_line(capsys, override, message):
    assert main(["sop", override]) == 1
    err = capsys.readouterr().err
    assert err.startswith(message) and len(err.strip().splitlines()) == 1, err


def test_a_key_the_data_set_class_does_not_take_is_named_in_one_line(tmp_path, capsys):
    # An added key: Hydra's InstantiationException and a traceback; the folder need not exist to say so.
    assert main(["sop", "+dataset.bogus=1", f"paths.data_dir={tmp_path}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "sop: dataset.bogus=1 is not an option of noisydml.data.sop.StanfordOnlineProducts (its options: "
    )
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_a_value_a_library_refuses_while_building_the_data_set_is_named_in_one_line(tmp_path, capsys):
    # torchvision's refusal of the size, which named no key.
    layouts.make_sop(tmp_path)
    assert main(["sop", "dataset.image_size=abc", f"paths.data_dir={tmp_path}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "sop: dataset.image_size=abc is refused by noisydml.data.sop.StanfordOnlineProducts (Please provide"
    )
    assert err.strip().endswith("e.g. its default, dataset.image_size=224") and len(err.splitlines()) == 1


def test_an_override_that_is_not_key_value_is_refused_in_one_line(capsys):
    assert main(["sop", "dataset.root"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("sop: dataset.root: an override is key=value") and len(err.splitlines()) == 1


def test_a_folder_of_one_class_is_told_what_a_class_disjoint_split_needs(tmp_path, capsys):
    # It asked to set dataset.train_classes "between 1 and 0", after "cub: cub:".
    folder = tmp_path / "CUB_200_2011"
    (folder / "images" / "001.a").mkdir(parents=True)
    (folder / "images.txt").write_text("1 001.a/1.jpg\n2 001.a/2.jpg\n")
    (folder / "image_class_labels.txt").write_text("1 1\n2 1\n")
    assert main(["cub", f"paths.data_dir={tmp_path}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cub: dataset.train_classes=") and "cub: cub:" not in err
    assert "a class-disjoint split needs two classes or more: the folder holds one" in err


def test_without_a_data_set_it_asks_for_one_and_no_overrides(capsys):
    with pytest.raises(SystemExit):
        main([])
    err = capsys.readouterr().err
    assert "give the data set to check, e.g. noisydml-check-data cub" in err and "required" not in err
