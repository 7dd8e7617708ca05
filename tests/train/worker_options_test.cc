// mirrored-worker's flags: values that would silently mean something else
// (a learning rate of 0 taken as "the default", a NaN timeout taken as
// "never") are refused, naming the flag.
#include "worker/worker_options.h"

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "worker/role_options.h"

namespace mirrored {
namespace {

Status Parse(std::vector<std::string> args, WorkerOptions* options) {
  CLI::App app;
  options->Register(app);
  std::vector<const char*> argv = {"mirrored-worker"};
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {  // mirrored-worker: exit 2 with this message
    return InvalidArgumentError(e.what());
  }
  return options->Validate();
}

TEST(WorkerOptionsTest, NoLrIsTheOptimizersDefault) {
  WorkerOptions adam, sgd;
  ASSERT_TRUE(Parse({}, &adam).ok());
  EXPECT_DOUBLE_EQ(TrainerOptionsFrom(adam).optimizer.EffectiveLearningRate(), 1e-3);
  ASSERT_TRUE(Parse({"--optimizer", "sgd"}, &sgd).ok());
  EXPECT_DOUBLE_EQ(TrainerOptionsFrom(sgd).optimizer.EffectiveLearningRate(), 1e-2);
  WorkerOptions given;
  ASSERT_TRUE(Parse({"--lr", "0.05"}, &given).ok());
  EXPECT_DOUBLE_EQ(TrainerOptionsFrom(given).optimizer.EffectiveLearningRate(), 0.05);
}

// A script's defaults followed by the user's own (scripts/run-demo.sh
// --epochs 3): the last value wins, as with argparse.
TEST(WorkerOptionsTest, AFlagGivenTwiceTakesItsLastValue) {
  WorkerOptions o;
  ASSERT_TRUE(Parse({"--model", "cnn", "--epochs", "1", "--lr", "0.5", "--epochs", "3", "--model", "mlp", "--lr",
                     "0.01", "--validate", "--validate"},
                    &o)
                  .ok());
  EXPECT_EQ(o.epochs, 3);
  EXPECT_EQ(o.model, "mlp");
  EXPECT_TRUE(o.model_given);
  EXPECT_DOUBLE_EQ(TrainerOptionsFrom(o).optimizer.EffectiveLearningRate(), 0.01);
  EXPECT_TRUE(o.validate);
}

TEST(WorkerOptionsTest, ValidationIsOnUnlessNoValidate) {
  WorkerOptions plain, off, on;
  ASSERT_TRUE(Parse({}, &plain).ok());
  EXPECT_TRUE(plain.validate);
  ASSERT_TRUE(Parse({"--no-validate"}, &off).ok());
  EXPECT_FALSE(off.validate);
  ASSERT_TRUE(Parse({"--validate"}, &on).ok());
  EXPECT_TRUE(on.validate);
}

// The last of --validate and --no-validate on the command line wins, as
// with argparse (CLI11 ran the two flags' callbacks in declaration order).
TEST(WorkerOptionsTest, TheLastOfValidateAndNoValidateWins) {
  const std::vector<std::pair<std::vector<std::string>, bool>> cases = {
      {{"--no-validate", "--validate"}, true},
      {{"--validate", "--no-validate"}, false},
      {{"--no-validate", "--validate", "--no-validate"}, false},
      {{"--validate", "--no-validate", "--epochs", "2", "--validate"}, true},
      {{"--validate=false"}, false},
      {{"--no-validate", "--validate=true"}, true}};
  for (const auto& [args, expected] : cases) {
    WorkerOptions o;
    ASSERT_TRUE(Parse(args, &o).ok());
    std::string line;
    for (const auto& a : args) line += a + " ";
    EXPECT_EQ(o.validate, expected) << line;
  }
}

TEST(WorkerOptionsTest, LrThatIsNotAPositiveNumberIsRefused) {
  for (const char* bad : {"0", "-1", "nan", "inf"}) {
    WorkerOptions o;
    Status s = Parse({"--lr", bad}, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(std::string("--lr ") + bad + " must be a positive number"), std::string::npos)
        << s.message();
  }
}

TEST(WorkerOptionsTest, PrecisionIsNamedAndCpuReplicasRefuseWhatTheyCannotCompute) {
  WorkerOptions a, b, c, d, e;
  EXPECT_EQ(a.precision, "fp32");
  EXPECT_NE(Parse({"--precision", "half"}, &a).message().find("--precision \"half\" is not one of"),
            std::string::npos);
  // --device cpu is refused at once (auto waits for the job's devices).
  const Status cpu = Parse({"--device", "cpu", "--precision", "tf32"}, &b);
  EXPECT_EQ(cpu.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(cpu.message().find("GPU math mode"), std::string::npos) << cpu.message();
  EXPECT_TRUE(Parse({"--precision", "bf16"}, &c).ok());
  EXPECT_EQ(c.precision, "bf16");
  for (const char* bad : {"0", "0.5", "nan", "1e39"}) {
    WorkerOptions o;
    EXPECT_NE(Parse({"--initial-loss-scale", bad}, &o).message().find("--initial-loss-scale"), std::string::npos)
        << bad;
  }
  EXPECT_TRUE(Parse({"--precision", "fp16", "--initial-loss-scale", "1024"}, &d).ok());
  EXPECT_EQ(d.initial_loss_scale, 1024);
  EXPECT_TRUE(Parse({"--device", "cpu"}, &e).ok());
}

TEST(WorkerOptionsTest, AllreduceDtypeIsNamedAndIndependentOfPrecision) {
  WorkerOptions a, b, c;
  EXPECT_EQ(a.allreduce_dtype, "fp32");
  const Status bad = Parse({"--allreduce-dtype", "half"}, &a);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);  // exit 2
  EXPECT_NE(bad.message().find("--allreduce-dtype \"half\" is not one of fp32, bf16, fp16"), std::string::npos)
      << bad.message();
  // FP32 training with bf16 gradients, on the CPU too.
  EXPECT_TRUE(Parse({"--device", "cpu", "--allreduce-dtype", "bf16"}, &b).ok());
  EXPECT_EQ(b.allreduce_dtype, "bf16");
  EXPECT_EQ(b.precision, "fp32");
  EXPECT_TRUE(Parse({"--allreduce-dtype", "fp16"}, &c).ok());
  EXPECT_EQ(TrainerOptionsFrom(c).communication.allreduce_dtype, "fp16");
}

TEST(WorkerOptionsTest, NonFiniteSecondsAreRefused) {
  WorkerOptions a, b, c;
  EXPECT_NE(Parse({"--eval-timeout", "nan"}, &a).message().find("--eval-timeout nan must be a number of seconds"),
            std::string::npos);
  EXPECT_NE(Parse({"--collective-timeout", "inf"}, &b).message().find("--collective-timeout inf must be a number of "
                                                                       "seconds above 0"),
            std::string::npos);
  EXPECT_TRUE(Parse({"--eval-timeout", "0"}, &c).ok());
}

// Probe D7: 1e300 passed the check, then overflowed int64 milliseconds
// (a Gloo enforce failure, a negative registration wait).
TEST(WorkerOptionsTest, SecondsBeyondWhatAClockHoldsAreRefusedNamingTheFlag) {
  for (const char* flag : {"--collective-timeout", "--registration-timeout", "--heartbeat-timeout",
                           "--heartbeat-interval", "--poll-interval", "--eval-timeout"}) {
    WorkerOptions o;
    const Status s = Parse({flag, "1e300"}, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << flag;
    EXPECT_NE(s.message().find(std::string(flag) + " 1e+300 must be a number of seconds"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("at most 1e+09"), std::string::npos) << s.message();
  }
  WorkerOptions ok;
  EXPECT_TRUE(Parse({"--registration-timeout", "1e9", "--heartbeat-timeout", "1e9"}, &ok).ok());
}

// Probe D15: `--run-dir ""` (a resume script's unset $RUN_DIR) trained and
// saved nothing, as if the flag were absent.
TEST(WorkerOptionsTest, AnEmptyRunDirIsRefused) {
  WorkerOptions o;
  const Status s = Parse({"--run-dir", ""}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--run-dir is empty (an unset variable?)"), std::string::npos) << s.message();
}

// CLI11 alone turns "-1" into 2^64 - 1 for the unsigned --seed and a number
// past int64_t into its largest value: refused, naming the flag. The seed
// goes up to 2^63 - 1, what state.json records.
TEST(WorkerOptionsTest, IntegerFlagsTakeOnlyTheIntegersTheyHold) {
  for (const char* bad : {"-1", "18446744073709551615", "9223372036854775808", "99999999999999999999"}) {
    WorkerOptions o;
    Status s = Parse({"--seed", bad}, &o);
    EXPECT_EQ(s.message(), std::string("--seed: ") + bad + " is out of range: 0 to 9223372036854775807") << bad;
  }
  WorkerOptions seed_max;
  ASSERT_TRUE(Parse({"--seed", "9223372036854775807"}, &seed_max).ok());
  EXPECT_EQ(seed_max.seed, 9223372036854775807u);
  WorkerOptions fraction;
  EXPECT_EQ(Parse({"--seed", "1.5"}, &fraction).message(), "--seed: \"1.5\" is not an integer");
  WorkerOptions epochs, steps;
  EXPECT_NE(Parse({"--epochs", "99999999999999999999"}, &epochs).message().find("--epochs: 99999999999999999999 is "
                                                                                "out of range"),
            std::string::npos);
  EXPECT_NE(Parse({"--max-steps", "0x10"}, &steps).message().find("--max-steps: \"0x10\" is not an integer"),
            std::string::npos);
  WorkerOptions octal_looking;
  ASSERT_TRUE(Parse({"--log-every", "010"}, &octal_looking).ok());
  EXPECT_EQ(octal_looking.log_every, 10);  // decimal, as argparse reads it (CLI11 alone: octal 8)
}

}  // namespace
}  // namespace mirrored
