#include "pond/tools/daemon_config.h"

#include <algorithm>
#include <iomanip>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "pond/base/printable.h"

namespace pond::tools {

namespace {

// The file's keys, parsed by toml++ (CLI11's own reader takes what TOML refuses: an unterminated
// string, an unquoted address), given to the subcommand picked as CLI11 config items. CLI11
// applies an item only to a flag the command line left unset, which is what lets the command line
// win.
class SubcommandConfig : public CLI::ConfigTOML {
 public:
  explicit SubcommandConfig(CLI::App* root) : root_(root) {}
  // The file --config named, for the messages.
  void set_file(const std::string& file) { file_ = file; }

  std::vector<CLI::ConfigItem> from_config(std::istream& in) const override {
    const std::vector<CLI::App*> picked = root_->get_subcommands();
    CLI::App* sub = picked.empty() ? nullptr : picked.front();
    if (sub == nullptr || sub->get_option_no_throw("--config") == nullptr) {
      throw CLI::ConfigError("--config is for pond mn and pond cn");
    }
    const std::string where = file_ + ": ";
    const toml::table doc = Parse(in);
    std::vector<CLI::ConfigItem> items;
    for (const auto& [key, value] : doc) {
      const std::string name(key.str());
      // What the file names goes into messages made printable: a TOML key may hold a newline.
      const std::string shown = Printable(name);
      if (value.is_table() && !value.as_table()->is_inline()) {
        throw CLI::ConfigError(where + "sections are not read; put every key at the top, not in [" +
                               shown + "]");
      }
      const CLI::Option* flag = name == "config" ? nullptr : sub->get_option_no_throw("--" + name);
      if (flag == nullptr) {
        throw CLI::ConfigError(where + "unknown key \"" + shown + "\" (pond " + sub->get_name() +
                               " has no --" + shown + ")");
      }
      CLI::ConfigItem item;
      item.parents = {sub->get_name()};
      item.name = name;
      // A flag that takes several values takes a list, and one that takes one value a scalar:
      // TOML says which the writer meant, so the file is held to it.
      const bool takes_several = flag->get_items_expected_max() > 1;
      if (const toml::array* list = value.as_array()) {
        if (!takes_several) {
          throw CLI::ConfigError(where + name + " takes one value, not a list (--" + name + ")");
        }
        for (const toml::node& element : *list) item.inputs.push_back(Scalar(name, element));
      } else {
        if (takes_several) {
          throw CLI::ConfigError(where + name + " takes a list: " + name + " = [...] (--" + name +
                                 ")");
        }
        item.inputs.push_back(Scalar(name, value));
      }
      items.push_back(std::move(item));
    }
    return items;
  }

 private:
  // The whole file as TOML, or one line naming where it is not.
  toml::table Parse(std::istream& in) const {
    std::ostringstream text;
    text << in.rdbuf();
    try {
      return toml::parse(text.str(), file_);
    } catch (const toml::parse_error& e) {
      const toml::source_position at = e.source().begin;
      std::string what(e.description());
      // toml++ may end a description with a newline; the message is one line.
      std::replace(what.begin(), what.end(), '\n', ' ');
      throw CLI::ConfigError(file_ + ":" + std::to_string(at.line) + ":" +
                             std::to_string(at.column) + ": not TOML: " + what);
    }
  }

  // A string, number or boolean as the text the flag parses; anything else is refused here.
  std::string Scalar(const std::string& name, const toml::node& value) const {
    if (const auto* s = value.as_string()) return s->get();
    if (const auto* i = value.as_integer()) return std::to_string(i->get());
    if (const auto* b = value.as_boolean()) return b->get() ? "true" : "false";
    if (const auto* f = value.as_floating_point()) {
      std::ostringstream out;
      out << std::setprecision(17) << f->get();
      return out.str();
    }
    throw CLI::ConfigError(file_ + ": " + name +
                           " takes strings, numbers or true/false, not a table, a nested list "
                           "or a date (--" +
                           name + ")");
  }

  CLI::App* root_;
  std::string file_;
};
}  // namespace

void EnableDaemonConfig(CLI::App& root) {
  // Hidden at the root: it is given after `mn` or `cn`, and listed in their --help.
  root.set_config("--config", "", "")
      ->group("")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  root.config_formatter(std::make_shared<SubcommandConfig>(&root));
  root.allow_config_extras(CLI::config_extras_mode::error);
}

void AddConfigFlag(CLI::App* cmd) {
  CLI::App* root = cmd->get_parent();
  CLI::Option* root_config = root->get_config_ptr();
  std::shared_ptr<SubcommandConfig> formatter =
      std::dynamic_pointer_cast<SubcommandConfig>(root->get_config_formatter());
  if (root_config == nullptr || formatter == nullptr) {
    throw std::logic_error("AddConfigFlag before EnableDaemonConfig");
  }
  cmd->add_option_function<std::string>(
         "--config",
         [root_config, formatter](const std::string& file) {
           formatter->set_file(file);
           root_config->clear();
           root_config->add_result(file);
         },
         "read flags from FILE (TOML: `id = 2`, `coord = \"zk1:2181\"`, the flag names without "
         "--); flags given here win over it (docs/deploy.md)")
      ->type_name("FILE")
      // At once, while parsing: the root reads its config file before any option's callback.
      ->trigger_on_parse();
}

}  // namespace pond::tools
