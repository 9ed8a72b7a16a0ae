// Masking by token class (common/template_mask.h): each class on its own, in the positions real
// lines put it (inside key=value, parentheses, brackets, host:pid:tid prefixes), and the words
// that must stay words.
#include <catch2/catch.hpp>

#include "common/template_mask.h"

using namespace faultline::common;

TEST_CASE("each token class gets its own placeholder", "[templates][mask]") {
  CHECK(classifyToken("42") == TokenClass::kNum);
  CHECK(classifyToken("-3") == TokenClass::kNum);
  CHECK(classifyToken("1.5e-3") == TokenClass::kNum);
  CHECK(classifyToken("12ms") == TokenClass::kNum);
  CHECK(classifyToken("4GiB") == TokenClass::kNum);
  CHECK(classifyToken("100%") == TokenClass::kNum);
  CHECK(classifyToken("3.2GB/s") == TokenClass::kNum);
  CHECK(classifyToken("535.104.05") == TokenClass::kNum);
  CHECK(classifyToken("0x7f3a9c00") == TokenClass::kHex);
  CHECK(classifyToken("9f86d081884c7d65") == TokenClass::kHex);
  CHECK(classifyToken("10.0.3.17") == TokenClass::kIp);
  CHECK(classifyToken("10.0.3.17:29500") == TokenClass::kIp);
  CHECK(classifyToken("192.168.0.0/16") == TokenClass::kIp);
  CHECK(classifyToken("fe80::1ff:fe23:4567:890a") == TokenClass::kIp);
  CHECK(classifyToken("2001:0db8:85a3:0000:0000:8a2e:0370:7334") == TokenClass::kIp);
  CHECK(classifyToken("0000:3b:00.0") == TokenClass::kPci);
  CHECK(classifyToken("00000000:3B:00.0") == TokenClass::kPci);
  CHECK(classifyToken("0000:3b:00") == TokenClass::kPci);
  CHECK(classifyToken("3b:00.0") == TokenClass::kPci);
  CHECK(classifyToken("3b:00") == TokenClass::kPci);
  CHECK(classifyToken("00:1b:21:3a:4f:5c") == TokenClass::kMac);
  CHECK(classifyToken("/usr/lib/python3.10/site-packages/torch/nn/modules/module.py") == TokenClass::kPath);
  CHECK(classifyToken("./train.py") == TokenClass::kPath);
  CHECK(classifyToken("data/shards/00017") == TokenClass::kPath);
  CHECK(classifyToken("https://github.com/NVIDIA/nccl/issues/1") == TokenClass::kUrl);
  CHECK(classifyToken("GPU-5b7a2a3e-6c2f-9a5b-8d4e-0123456789ab") == TokenClass::kUuid);
  CHECK(classifyToken("MIG-GPU-5b7a2a3e-6c2f-9a5b-8d4e-0123456789ab") == TokenClass::kUuid);
  CHECK(classifyToken("5b7a2a3e-6c2f-9a5b-8d4e-0123456789ab") == TokenClass::kUuid);
  CHECK(classifyToken("gpu-h01") == TokenClass::kHost);
  CHECK(classifyToken("ip-172-31-92-157") == TokenClass::kHost);
  CHECK(classifyToken("ip-172-31-92-157.ec2.internal") == TokenClass::kHost);
  CHECK(classifyToken("node042") == TokenClass::kHost);
  CHECK(classifyToken("nid001234") == TokenClass::kHost);
  CHECK(classifyToken("n01.cluster.local") == TokenClass::kHost);
  CHECK(classifyToken("2024-06-01") == TokenClass::kTime);
  CHECK(classifyToken("2024-06-01T10:00:00.123Z") == TokenClass::kTime);
  CHECK(classifyToken("2024-06-01T10:00:00+02:00") == TokenClass::kTime);
  CHECK(classifyToken("10:00:00") == TokenClass::kTime);
  CHECK(classifyToken("10:00:00.250") == TokenClass::kTime);

  // Words stay words.
  for (const char* word : {"NVRM", "Xid", "error", "NCCL", "WARN", "I/O", "non-fatal", "utf-8", "A100-SXM4-80GB",
                           "torch.distributed", "model.pt", "e1000e", "std::runtime_error"})
    CHECK(classifyToken(word) == TokenClass::kNone);
}

TEST_CASE("masking keeps the words and punctuation around the variables", "[templates][mask]") {
  CHECK(maskMessage("NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, Ch 00000010") ==
        "NVRM: Xid (PCI:<PCI>): <NUM>, pid=<PID>, name=python, Ch <NUM>");
  CHECK(maskMessage("gpu-h01:4242:4250 [3] NCCL INFO Channel 00/32 : 0 1 2 3") ==
        "<HOST>:<NUM>:<NUM> [<RANK>] NCCL INFO Channel <NUM>/<NUM> : <NUM> <NUM> <NUM> <NUM>");
  CHECK(maskMessage("[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered") ==
        "[rank<RANK>]: RuntimeError: CUDA error: an illegal memory access was encountered");
  CHECK(maskMessage("Out of memory: Killed process 31337 (python) total-vm:123456kB, anon-rss:7890kB") ==
        "Out of memory: Killed process <PID> (python) total-vm:<NUM>, anon-rss:<NUM>");
  CHECK(maskMessage("python[31337]: segfault at 7f3a9c001000 ip 00007f3a9c0 sp 00007ffd1c2 error 4") ==
        "python[<PID>]: segfault at <HEX> ip <HEX> sp <HEX> error <NUM>");
  CHECK(maskMessage("connect to 10.0.3.17<45123> failed : No route to host") ==
        "connect to <IP><<NUM>> failed : No route to host");
  CHECK(maskMessage("[::1]:8080 refused") == "[<IP>]:<NUM> refused");
  CHECK(maskMessage("veth06ebf1: Link UP") == "veth<HEX>: Link UP");
  CHECK(maskMessage("vethbcea12: Link UP") == "veth<HEX>: Link UP");
  CHECK(maskMessage("EXT4-fs (nvme0n1p2): mounted filesystem") == "EXT<NUM>-fs (nvme<NUM>n<NUM>p<NUM>): mounted filesystem");
  CHECK(maskMessage("  File \"/opt/app/train.py\", line 212, in forward") ==
        "File \"<PATH>\", line <NUM>, in forward");
  CHECK(maskMessage("GPU GPU-5b7a2a3e-6c2f-9a5b-8d4e-0123456789ab at 2024-06-01T10:00:00Z took 12ms") ==
        "GPU <UUID> at <TIME> took <NUM>");
  CHECK(maskMessage("mlx5_core 0000:3b:00.0: mlx5_0 port 1 link down, mac 00:1b:21:3a:4f:5c") ==
        "mlx5_core <PCI>: mlx<NUM>_<NUM> port <NUM> link down, mac <MAC>");
  CHECK(maskMessage("slurmstepd: error: *** JOB 4242 ON node042 CANCELLED AT 2024-06-01T10:00:00 ***") ==
        "slurmstepd: error: *** JOB <NUM> ON <HOST> CANCELLED AT <TIME> ***");
}

TEST_CASE("a zero after a count or status word stays literal", "[templates][mask]") {
  CHECK(maskMessage("process exited with exit code 0") == "process exited with exit code 0");
  CHECK(maskMessage("process exited with exit code 137") == "process exited with exit code <NUM>");
  CHECK(maskMessage("errors: 0, warnings: 3") == "errors: 0, warnings: <NUM>");
  CHECK(maskMessage("rc=0") == "rc=0");
  CHECK(maskMessage("exitcode : 0 (pid: 4242)") == "exitcode : 0 (pid: <PID>)");
  CHECK(maskMessage("job 4242 completed with slurm_rc = 0, job_rc = 1") ==
        "job <NUM> completed with slurm_rc = 0, job_rc = <NUM>");
  CHECK(maskMessage("rx_errors: 0 error_count=0") == "rx_errors: 0 error_count=0");
  CHECK(maskMessage("rank 0 ready") == "rank <NUM> ready");
}

TEST_CASE("tokens are split on any whitespace and keep their positions", "[templates][mask]") {
  MaskedMessage m;
  maskMessage("  a\tb=1 \n  c  ", &m);
  REQUIRE(m.size() == 3);
  CHECK(m.text == "a b=<NUM> c");
  CHECK(m.token(0) == "a");
  CHECK(m.token(1) == "b=<NUM>");
  CHECK(m.token(2) == "c");
  CHECK(m.variable == std::vector<uint8_t>{0, 1, 0});
  maskMessage("", &m);
  CHECK(m.size() == 0);
  CHECK(m.text.empty());
}
