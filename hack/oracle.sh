#!/usr/bin/env bash
echo "oracle: not built yet" >&2
