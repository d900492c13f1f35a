#!/usr/bin/env bash
# Downloads (here, where PyPI is reachable) the cp312 wheels sweep needs on the lent H200 machine, which has no
# network and lacks these packages (its image has httpx, h11, psutil, rich, typer, numpy, matplotlib, tokenizers,
# prometheus-client, pyyaml, jinja2, nvidia-ml-py...). proof.sh installs .whl/*/*.whl.
#   usage: fetch-wheels.sh OUTDIR      (writes OUTDIR/core/*.whl and OUTDIR/sgl/*.whl; about 8 MiB together)
#   core: sweep's own dependencies; sgl: what SGLang's bench_serving needs beside the bundle (its datasets import)
set -euo pipefail
out=$(mkdir -p "$1" && cd "$1" && pwd)
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
      --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64)
get() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
          "${plat[@]}" -d "$out/$1" "${@:2}"; }
get core optuna==5.1.0 sqlalchemy==2.1.9 alembic==1.20.1 mako==1.4.3 colorlog==6.12.0 \
    pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 httptools==0.9.0 \
    starlette==1.10.0 uvicorn==0.54.0
get sgl datasets multiprocess   # dill comes with the SGLang bundle
# The core wheels unpacked and xz-packed (6 MB instead of 9: the device tool carries 64 MiB in all); proof.sh unpacks
# it when present. Carry .whl/site instead of .whl/core.
tmp=$(mktemp -d); for w in "$out"/core/*.whl; do python3 -m zipfile -e "$w" "$tmp/site/"; done
mkdir -p "$out/site"; XZ_OPT=-9e tar -cJf "$out/site/core-site.tar.xz" -C "$tmp/site" .; rm -rf "$tmp"
du -sh "$out"/*
