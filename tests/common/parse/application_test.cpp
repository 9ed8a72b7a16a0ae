#include <catch2/catch.hpp>

#include "parse_test_util.h"

using namespace faultline::common;
using namespace faultline::common::testing;

TEST_CASE("application: rank prefixes") {
  auto r = parseAll(LogFormat::kApplication,
                    "3: loss 1.25\n"
                    "  12: padded srun label\n"
                    "[rank5]: RuntimeError: NCCL communicator was aborted\n"
                    "[default7]:[W0601 10:00:01.123456789 ProcessGroupNCCL.cpp:1168] Warning\n"
                    "[default1]:[rank9]: both prefixes\n"
                    "[RANK 4] upper-case form\n"
                    "no prefix at all\n");
  REQUIRE(r.records.size() == 7);
  CHECK(r.records[0].rank == 3);
  CHECK(r.records[0].text == "loss 1.25");
  CHECK_FALSE(r.records[0].time_known);
  CHECK(r.records[1].rank == 12);
  CHECK(r.records[2].rank == 5);
  CHECK(r.records[2].text == "RuntimeError: NCCL communicator was aborted");
  CHECK(r.records[3].rank == 7);
  CHECK(r.records[3].priority == 4);
  CHECK(r.records[3].time_known);
  CHECK(r.records[3].text == "[W0601 10:00:01.123456789 ProcessGroupNCCL.cpp:1168] Warning");
  CHECK(r.records[4].rank == 9);
  CHECK(r.records[5].rank == 4);
  CHECK(r.records[5].text == "upper-case form");
  CHECK(r.records[6].rank == -1);
}

TEST_CASE("application: time stamp prefixes") {
  ParseOptions o;
  o.default_year = 2024;
  o.utc_offset_sec = 3600;
  auto r = parseAll(LogFormat::kApplication,
                    "2024-06-01 10:00:01,123 - train - INFO - step 1\n"
                    "2024-06-01T10:00:01.500Z INFO ready\n"
                    "[2024-06-01 10:00:02,000] ERROR boom\n"
                    "E0601 10:00:03.250000 1234 nccl_utils.cc:12] failed\n"
                    "0: 2024-06-01T10:00:04+02:00 ranked and stamped\n",
                    o);
  REQUIRE(r.records.size() == 5);
  const int64_t t0 = 1717236000LL * kSec;  // 2024-06-01T10:00:00Z
  CHECK(r.records[0].time_ns == t0 + 1 * kSec + 123000000 - 3600 * kSec);
  CHECK(r.records[0].text == "- train - INFO - step 1");
  CHECK(r.records[1].time_ns == t0 + 1 * kSec + 500000000);
  CHECK(r.records[1].text == "INFO ready");
  CHECK(r.records[2].time_ns == t0 + 2 * kSec - 3600 * kSec);
  CHECK(r.records[2].text == "ERROR boom");
  CHECK(r.records[3].time_ns == t0 + 3 * kSec + 250000000 - 3600 * kSec);
  CHECK(r.records[3].priority == 3);
  CHECK(r.records[3].text == "failed");
  CHECK(r.records[4].rank == 0);
  CHECK(r.records[4].time_ns == t0 + 4 * kSec - 2 * 3600 * kSec);
}

TEST_CASE("application: NCCL, srun and slurmstepd lines") {
  auto r = parseAll(
      LogFormat::kApplication,
      "gpu-a01:12345:12399 [3] NCCL WARN Call to ibv_modify_qp failed\n"
      "[rank2]:gpu-b07:2222:2290 [2] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion\n"
      "slurmstepd: error: *** JOB 1234 ON gpu-a01 CANCELLED AT 2024-06-01T12:00:00 DUE TO TIME "
      "LIMIT ***\n"
      "srun: error: gpu-a01: task 3: Exited with exit code 1\n");
  REQUIRE(r.records.size() == 4);
  CHECK(r.records[0].host == "gpu-a01");
  CHECK(r.records[0].text == "gpu-a01:12345:12399 [3] NCCL WARN Call to ibv_modify_qp failed");
  CHECK(r.records[0].rank == -1);
  CHECK(r.records[1].host == "gpu-b07");
  CHECK(r.records[1].rank == 2);
  CHECK(r.records[2].host.empty());
  CHECK(r.records[2].text.rfind("slurmstepd: error: *** JOB 1234", 0) == 0);
  CHECK(r.records[3].text == "srun: error: gpu-a01: task 3: Exited with exit code 1");
}

TEST_CASE("application: a plain traceback is one record") {
  auto r = parseAll(LogFormat::kApplication,
                    "step 10\n"
                    "Traceback (most recent call last):\n"
                    "  File \"/workspace/train.py\", line 42, in <module>\n"
                    "    main()\n"
                    "    ^^^^^^\n"
                    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
                    "after\n");
  REQUIRE(r.records.size() == 3);
  CHECK(r.records[1].text ==
        "Traceback (most recent call last):\n"
        "  File \"/workspace/train.py\", line 42, in <module>\n"
        "    main()\n"
        "    ^^^^^^\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB");
  CHECK(r.records[1].line == 2);
  CHECK(r.records[2].text == "after");
  CHECK(lineCountOf(r.records) == r.report.lines);
}

TEST_CASE("application: interleaved rank tracebacks stay apart") {
  const std::string input =
      "[rank0]: Traceback (most recent call last):\n"
      "[rank1]: Traceback (most recent call last):\n"
      "[rank0]:   File \"/train.py\", line 10, in <module>\n"
      "[rank1]:   File \"/train.py\", line 10, in <module>\n"
      "[rank0]:     main()\n"
      "[rank1]:     main()\n"
      "[rank1]: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error\n"
      "[rank0]: torch.distributed.DistBackendError: NCCL error\n"
      "[rank2]: unrelated line\n";
  auto r = parseAll(LogFormat::kApplication, input);
  REQUIRE(r.records.size() == 3);
  // The unrelated rank-2 line completes as soon as read; tracebacks close at end of input or
  // at their rank's next non-traceback line.
  const LogRecord* r0 = nullptr;
  const LogRecord* r1 = nullptr;
  for (const auto& rec : r.records) {
    if (rec.rank == 0) r0 = &rec;
    if (rec.rank == 1) r1 = &rec;
  }
  REQUIRE(r0);
  REQUIRE(r1);
  CHECK(r0->text ==
        "Traceback (most recent call last):\n"
        "  File \"/train.py\", line 10, in <module>\n"
        "    main()\n"
        "torch.distributed.DistBackendError: NCCL error");
  CHECK(r0->line == 1);
  CHECK(r1->text ==
        "Traceback (most recent call last):\n"
        "  File \"/train.py\", line 10, in <module>\n"
        "    main()\n"
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error");
  CHECK(r1->line == 2);
  CHECK(r.report.lines == 9);
  CHECK(r.report.skipped == 0);
}

TEST_CASE("application: chained tracebacks continue the same record") {
  const std::string input =
      "2: Traceback (most recent call last):\n"
      "2:   File \"a.py\", line 1, in f\n"
      "2: KeyError: 'x'\n"
      "2: \n"
      "2: During handling of the above exception, another exception occurred:\n"
      "2: \n"
      "2: Traceback (most recent call last):\n"
      "2:   File \"a.py\", line 3, in g\n"
      "2: ValueError: y\n"
      "2: \n"
      "2: The above exception was the direct cause of the following exception:\n"
      "2: \n"
      "2: Traceback (most recent call last):\n"
      "2:   File \"a.py\", line 5, in h\n"
      "2: RuntimeError: z\n"
      "2: \n"
      "2: next line\n";
  auto r = parseAll(LogFormat::kApplication, input);
  REQUIRE(r.records.size() == 2);
  CHECK(r.records[0].rank == 2);
  CHECK(r.records[0].text ==
        "Traceback (most recent call last):\n  File \"a.py\", line 1, in f\nKeyError: 'x'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n  File \"a.py\", line 3, in g\nValueError: y\n\n"
        "The above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n  File \"a.py\", line 5, in h\nRuntimeError: z");
  CHECK(r.records[1].text == "next line");
  CHECK(r.report.lines == 17);
  CHECK(r.report.skipped == 1);  // the blank line after the last exception
}

TEST_CASE("application: traceback bounded by max_record_lines") {
  ParseOptions o;
  o.max_record_lines = 3;
  auto r = parseAll(LogFormat::kApplication,
                    "Traceback (most recent call last):\n"
                    "  File \"a\", line 1\n"
                    "  File \"b\", line 2\n"
                    "  File \"c\", line 3\n"
                    "ValueError: v\n",
                    o);
  REQUIRE(r.records.size() == 2);
  CHECK(r.records[0].text == "Traceback (most recent call last):\n  File \"a\", line 1\n  File \"b\", line 2");
  CHECK(r.records[1].text == "  File \"c\", line 3\nValueError: v");
}

TEST_CASE("application: a stamped line ends an unfinished traceback") {
  auto r = parseAll(LogFormat::kApplication,
                    "Traceback (most recent call last):\n"
                    "  File \"a\", line 1\n"
                    "2024-06-01 10:00:00,000 INFO next\n");
  REQUIRE(r.records.size() == 2);
  CHECK(r.records[0].text == "Traceback (most recent call last):\n  File \"a\", line 1");
  CHECK(r.records[1].text == "INFO next");
}

// Open MPI's show_help frame: two lines of exactly 74 dashes.
const std::string kOmpiRule(74, '-');

TEST_CASE("application: an Open MPI help message between its frames is one record") {
  const std::string input = "ld.so.1: orted: fatal: relocation error: file libx.so: symbol strnlen: referenced symbol not found\n" +
                            kOmpiRule + "\n" +
                            "ORTE has lost communication with its daemon located on node:\n"
                            "\n"
                            "  hostname:  sunpc1\n"
                            "\n"
                            "This is usually due to either a failure of the TCP network\n" +
                            kOmpiRule + "\n" + "after\n";
  auto r = parseAll(LogFormat::kApplication, input);
  REQUIRE(r.records.size() == 3);
  CHECK(r.records[1].text ==
        "ORTE has lost communication with its daemon located on node:\n"
        "\n"
        "  hostname:  sunpc1\n"
        "\n"
        "This is usually due to either a failure of the TCP network");
  CHECK(r.records[1].line == 3);
  CHECK(r.records[2].text == "after");
  // The two frames are skipped; every other line is in a record.
  CHECK(r.report.skipped == 2);
  CHECK(lineCountOf(r.records) + r.report.skipped == r.report.lines);
}

TEST_CASE("application: help frames are per rank, and blank lines around the message are skipped") {
  const std::string input = "3: " + kOmpiRule + "\n" +
                            "4: not part of rank 3's message\n"
                            "3: \n"
                            "3: The OpenFabrics stack has reported a network error event.\n"
                            "3:   Local host:        bones\n"
                            "3:   Error number:      10 (IBV_EVENT_PORT_ERR)\n"
                            "3: \n"
                            "3: " + kOmpiRule + "\n";
  auto r = parseAll(LogFormat::kApplication, input);
  REQUIRE(r.records.size() == 2);
  CHECK(r.records[0].text == "not part of rank 3's message");
  CHECK(r.records[1].rank == 3);
  CHECK(r.records[1].text ==
        "The OpenFabrics stack has reported a network error event.\n"
        "  Local host:        bones\n"
        "  Error number:      10 (IBV_EVENT_PORT_ERR)");
  CHECK(r.report.skipped == 4);
  CHECK(lineCountOf(r.records) + r.report.skipped == r.report.lines);
}

TEST_CASE("application: a ruler that never closes gives its lines back one record each") {
  std::string input = kOmpiRule + "\n";
  for (int i = 0; i < 60; ++i) input += "epoch " + std::to_string(i) + "\n";
  auto r = parseAll(LogFormat::kApplication, input);
  REQUIRE(r.records.size() == 60);
  CHECK(r.records.front().text == "epoch 0");
  CHECK(r.records.back().text == "epoch 59");
  // Other widths are no frame at all.
  auto other = parseAll(LogFormat::kApplication, std::string(40, '-') + "\nloss 1\n" + std::string(40, '-') + "\n");
  CHECK(other.records.size() == 3);
}
