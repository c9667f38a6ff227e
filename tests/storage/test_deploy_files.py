"""The deployment files parse and hold what KubeRay and the image need (docker and
a Kubernetes cluster cannot run here: these are static checks)."""

import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_raycluster_has_the_fields_kuberay_requires():
    doc = yaml.safe_load((ROOT / "deploy" / "kuberay" / "raycluster.yaml").read_text())
    assert doc["apiVersion"] == "ray.io/v1" and doc["kind"] == "RayCluster"
    spec = doc["spec"]
    head = spec["headGroupSpec"]
    assert isinstance(head["rayStartParams"], dict)
    assert head["template"]["spec"]["containers"][0]["image"]
    groups = spec["workerGroupSpecs"]
    assert groups, "no worker group"
    for g in groups:
        assert g["groupName"] and g["template"]["spec"]["containers"][0]["image"]
        assert all(isinstance(v, str) for v in g["rayStartParams"].values()), (
            "KubeRay takes rayStartParams values as strings"
        )
        # KubeRay passes the value to `ray start --resources=`: a quoted JSON object.
        resources = json.loads(json.loads(g["rayStartParams"]["resources"]))
        assert resources["browser"] >= 1
        assert g["minReplicas"] <= g["replicas"] <= g["maxReplicas"]


def test_dockerfile_installs_the_browser_fonts_node_appium_and_project():
    text = (ROOT / "Dockerfile").read_text()
    apt = " ".join(re.findall(r"apt-get install[^&]*", text))
    for pkg in ("chromium", "chromium-driver", "fonts-noto-cjk", "nodejs", "npm"):
        assert re.search(rf"(?<![\w-]){re.escape(pkg)}(?![\w-])", apt), f"{pkg} not installed"
    assert re.search(r"^FROM .*(bookworm|debian)", text, re.M), "not a Debian base"
    assert "COPY package.json package-lock.json" in text and "npm install" in text
    pinned = json.loads((ROOT / "package.json").read_text())["dependencies"]
    assert "appium" in pinned and "appium-chromium-driver" in pinned
    assert re.search(r'pip install "\.\[\$\{EXTRAS\}\]"', text)
    extras = re.search(r"ARG EXTRAS=(\S+)", text).group(1).split(",")
    assert "training" not in extras and "all" not in extras, "a worker image pulls a trainer"
    for pkg in ("schemas", "crawlers", "sandbox", "trajforge", "dagster_project"):
        assert f"COPY {pkg} {pkg}" in text
