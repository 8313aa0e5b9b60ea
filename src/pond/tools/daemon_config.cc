#include "pond/tools/daemon_config.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace pond::tools {

namespace {

// The file's keys, parsed by CLI11's TOML reader, given to the subcommand picked. CLI11 applies
// an item only to a flag the command line left unset, which is what lets the command line win.
class SubcommandConfig : public CLI::ConfigTOML {
 public:
  explicit SubcommandConfig(CLI::App* root) : root_(root) {}
  // The file --config named, for the messages.
  void set_file(const std::string& file) { file_ = file; }

  std::vector<CLI::ConfigItem> from_config(std::istream& in) const override {
    std::vector<CLI::ConfigItem> items = CLI::ConfigTOML::from_config(in);
    const std::vector<CLI::App*> picked = root_->get_subcommands();
    CLI::App* sub = picked.empty() ? nullptr : picked.front();
    if (sub == nullptr || sub->get_option_no_throw("--config") == nullptr) {
      throw CLI::ConfigError("--config is for pond mn and pond cn");
    }
    const std::string where = file_ + ": ";
    for (CLI::ConfigItem& item : items) {
      // "++" and "--" are how the reader marks a section's start and end.
      if (!item.parents.empty() || item.name == "++" || item.name == "--") {
        std::string section;
        for (const std::string& p : item.parents) section += (section.empty() ? "" : ".") + p;
        throw CLI::ConfigError(where + "sections are not read; put every key at the top, not in [" +
                               section + "]");
      }
      if (item.name == "config" || sub->get_option_no_throw("--" + item.name) == nullptr) {
        throw CLI::ConfigError(where + "unknown key \"" + item.name + "\" (pond " +
                               sub->get_name() + " has no --" + item.name + ")");
      }
      item.parents = {sub->get_name()};
    }
    return items;
  }

 private:
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
