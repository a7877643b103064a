"""The measures of ``itermask.evaluate(..., measures=[...])`` built from their ``conf/<name>/on.yaml`` presets."""

import pytest

from itermask.settings.presets import CONF_DIR, measure_analyses

VALUES = {"seed": 3, "model": {"pretrained": None}}
ON_PRESETS = sorted(p.parent.name for p in CONF_DIR.glob("*/on.yaml"))


def test_the_measure_presets_are_the_optional_analyses():
    assert ON_PRESETS == ["ffidelity", "naopc", "removal_reference", "sanity"]


@pytest.mark.parametrize("name", ON_PRESETS)
def test_every_on_preset_builds_its_analysis_with_the_seed_given(name):
    (analysis,) = measure_analyses([name], VALUES, CONF_DIR)
    assert analysis.name == name
    if name == "removal_reference":  # its OOD fit reads ${evaluation.subset_seed} (0 in conf/evaluate.yaml)
        assert analysis.ood_fit["seed"] == 0 and analysis.strategies["random_token"].seed == 3


def test_a_measure_given_twice_is_refused_by_name_and_by_instance():
    with pytest.raises(ValueError, match=r"measures: \['naopc'\] given more than once"):
        measure_analyses(["naopc", "sanity", "naopc"], VALUES, CONF_DIR)
    (built,) = measure_analyses(["sanity"], VALUES, CONF_DIR)
    with pytest.raises(ValueError, match=r"measures: \['sanity'\] given more than once"):
        measure_analyses(["sanity", built], VALUES, CONF_DIR)


def test_a_mistyped_name_gets_the_closest_one():
    from itermask.settings.presets import evaluation_settings, preset
    from itermask.validation import SettingsError

    with pytest.raises(ValueError, match=r"unknown measure 'snaity' \(did you mean 'sanity'\?\); choose from"):
        measure_analyses(["snaity"], VALUES, CONF_DIR)
    with pytest.raises(ValueError, match=r"saliency='gradiant'.* \(did you mean 'gradient'\?\); choose"):
        preset("saliency", "gradiant", CONF_DIR, VALUES)
    with pytest.raises(SettingsError, match=r"\['soft_draw'\] \(did you mean 'soft_draws'\?\)"):
        evaluation_settings({"soft_draw": 3}, 0, CONF_DIR)
    with pytest.raises(ValueError, match=r"'xyz': no such preset in .*saliency; choose from"):  # none close
        preset("saliency", "xyz", CONF_DIR, VALUES)
    with pytest.raises(ValueError, match=r"unknown measure 'SANITY' \(did you mean 'sanity'\?\)"):
        measure_analyses(["SANITY"], VALUES, CONF_DIR)


def test_a_dict_of_settings_is_refused_not_dropped_and_none_is_no_measure():
    with pytest.raises(ValueError, match=r"measures: a dict is not read \(its settings would be ignored\)"):
        measure_analyses({"sanity": {"levels": [0, 2]}}, VALUES, CONF_DIR)
    assert measure_analyses(None, VALUES, CONF_DIR) == ()
    assert [a.name for a in measure_analyses("naopc", VALUES, CONF_DIR)] == ["naopc"]  # one name alone


def test_a_grid_of_one_step_is_refused_with_the_settings():
    from itermask.settings.presets import evaluation_settings
    from itermask.validation import SettingsError

    with pytest.raises(SettingsError, match=r"evaluation.fractions needs at least two steps .* got \[0.5\]"):
        evaluation_settings({"fractions": [0.5], "aopc_bins": [0.5]}, 0, CONF_DIR)
    with pytest.raises(SettingsError, match=r"evaluation.counts needs at least two steps .*e.g. \[0, 3\]\), got \[3\]"):
        evaluation_settings({"steps": "count", "counts": [3], "aopc_bins": None}, 0, CONF_DIR)
    assert evaluation_settings({"fractions": [0.0, 0.5], "aopc_bins": [0.5]}, 0, CONF_DIR).fractions == (0.0, 0.5)
