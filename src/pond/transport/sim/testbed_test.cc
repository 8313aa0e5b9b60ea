// Testbed presets and model files: the checked-in files models/<preset>.json must load to exactly
// the presets in code and give a source for every field, and the loader takes notes but refuses
// unknown keys and bad values with one line naming them.
#include "pond/testbed.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace pond {
namespace {

#ifndef POND_MODELS_DIR
#error "POND_MODELS_DIR must name the models/ directory"
#endif

// Every field of a model, without its name (a loaded model is named after its file).
nlohmann::json FieldsOf(const Testbed& m) {
  nlohmann::json j = nlohmann::json::parse(m.ToJson());
  j.erase("name");
  return j;
}

// Writes `text` to a fresh file and returns its path.
std::string TempModel(const std::string& text) {
  static int n = 0;
  std::string path =
      (std::filesystem::temp_directory_path() /
       ("pond-model-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".json"))
          .string();
  std::ofstream(path) << text;
  return path;
}

class ModelFileTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelFileTest, LoadsToExactlyThePresetInCode) {
  std::string preset = GetParam();
  std::string path = std::string(POND_MODELS_DIR) + "/" + preset + ".json";
  Result<Testbed> loaded = Testbed::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  Result<Testbed> code = Testbed::Preset(preset);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(FieldsOf(*loaded), FieldsOf(*code)) << path << " differs from the preset in code";
}

TEST_P(ModelFileTest, ListsEveryFieldWithItsSource) {
  std::string path = std::string(POND_MODELS_DIR) + "/" + GetParam() + ".json";
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  std::set<std::string> fields(Testbed::FieldNames().begin(), Testbed::FieldNames().end());
  std::set<std::string> in_file;
  for (auto& [key, value] : j.items()) {
    if (key == "base" || key.starts_with("_") || key.ends_with("_source")) continue;
    in_file.insert(key);
    // A field without a source would be a number nobody can check.
    ASSERT_TRUE(j.contains(key + "_source")) << path << ": " << key << " has no source";
    EXPECT_FALSE(j[key + "_source"].get<std::string>().empty()) << key;
  }
  // Every field is in the file, so the file does not depend on its base's values.
  EXPECT_EQ(in_file, fields);
  // ToJson prints the same fields the files hold.
  std::set<std::string> printed;
  nlohmann::json defaults = FieldsOf(Testbed{});
  for (auto& [key, value] : defaults.items()) printed.insert(key);
  EXPECT_EQ(printed, fields);
}

INSTANTIATE_TEST_SUITE_P(Presets, ModelFileTest, ::testing::Values("cx3", "cx5", "lotus-testbed"));

TEST(TestbedTest, PresetsDifferAndAreAllListed) {
  const auto& names = Testbed::PresetNames();
  ASSERT_EQ(names.size(), 3u);
  for (size_t a = 0; a < names.size(); a++) {
    ASSERT_TRUE(Testbed::FromName(names[a]).ok()) << names[a];
    EXPECT_EQ(Testbed::Preset(names[a])->name, names[a]);
    for (size_t b = a + 1; b < names.size(); b++) {
      EXPECT_NE(FieldsOf(*Testbed::Preset(names[a])), FieldsOf(*Testbed::Preset(names[b])));
    }
  }
  Result<Testbed> unknown = Testbed::FromName("cx4");  // not a preset, so a file that is not there
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("cx4"), std::string::npos);
}

TEST(TestbedTest, LoadAppliesFieldsOverTheBaseAndIgnoresNotes) {
  std::string path = TempModel(R"({"base": "cx5", "_comment": "x", "one_way_ns": 1234,
      "one_way_ns_source": "a guess", "delay_distribution": "exponential",
      "delay_probability": 0.5, "delay_ns_max": 100, "delay_ns_mean": 10})");
  Result<Testbed> m = Testbed::Load(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->name, path);
  EXPECT_EQ(m->one_way_ns, 1234u);
  EXPECT_EQ(m->mn_atomic_mops, 8);  // from cx5
  EXPECT_EQ(m->faults.delay_distribution, DelayDistribution::kExponential);
  EXPECT_EQ(m->faults.delay_ns_mean, 10u);
  EXPECT_NE(m->ToJson().find("\"delay_distribution\":\"exponential\""), std::string::npos);
  std::filesystem::remove(path);
}

// Each bad file is refused with InvalidArgument, one line naming the file and the culprit.
TEST(TestbedTest, BadFilesAreRefusedByName) {
  struct Case {
    const char* text;
    const char* culprit;
  };
  const Case cases[] = {
      {R"({"one_way_nz": 5})", "unknown field 'one_way_nz'"},
      {R"({"bogus_source": "a note on a field that does not exist"})", "'bogus_source'"},
      {R"({"one_way_ns_source": 5})", "one_way_ns_source must be a string"},
      {R"({"one_way_ns": -5})", "one_way_ns must be a non-negative integer"},
      {R"({"link_gbps": "fast"})", "link_gbps must be a number"},
      {R"({"mn_atomic_mops": 0})", "NIC rates"},
      {R"({"base": 3})", "base must be"},
      {R"({"base": "cx9"})", "unknown model 'cx9'"},
      {R"({"delay_distribution": "normal"})", "delay_distribution must be"},
      {R"({"delay_probability": 0.5})", "delay"},
      {R"([1, 2])", "not a JSON object"},
      {R"({"one_way_ns": )", "not a JSON object"},
      // Found by model_fuzz (docs/checker.md "Fuzzing"): a name quoted raw split the line.
      {R"({"link\nx": 1})", "unknown field 'link\\x0ax'"},
      {R"({"base": "c\nx"})", "unknown model 'c\\x0ax'"},
  };
  for (const Case& c : cases) {
    std::string path = TempModel(c.text);
    Result<Testbed> m = Testbed::Load(path);
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_EQ(m.status().code(), Code::kInvalidArgument) << c.text;
    const std::string& msg = m.status().message();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.culprit), std::string::npos) << c.text << " -> " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    std::filesystem::remove(path);
  }
  EXPECT_EQ(Testbed::Load("/no/such/model.json").status().code(), Code::kInvalidArgument);
}

TEST(TestbedTest, FromNameTakesPresetsAndFiles) {
  EXPECT_EQ(Testbed::FromName("cx5")->name, "cx5");
  std::string path = std::string(POND_MODELS_DIR) + "/cx5.json";
  EXPECT_EQ(Testbed::FromName(path)->name, path);
  EXPECT_FALSE(Testbed::FromName("cx9").ok());
}

}  // namespace
}  // namespace pond
