#!/usr/bin/env bash
echo "testenv: not built yet" >&2
