#!/bin/sh
# Per-peer conformance table and every disagreement (docs/coverage/conformance.md).
#   tests/conformance/report.sh [BUILD_DIR] [md]
# BUILD_DIR defaults to ./build; `md` prints the lists as Markdown tables. The rules and data are
# read from the source tree the binary was built from, unless FAULTLINE_RULES_DIR /
# FAULTLINE_CONFORMANCE_DATA say otherwise. The exit status is the test's (non-zero below 95 %).
build=${1:-build}
FAULTLINE_CONFORMANCE_REPORT=${2:-1} exec "$build/tests/conformance_test" "[conformance]"
