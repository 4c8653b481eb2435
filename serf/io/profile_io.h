#pragma once
// Reading and writing profiles ("serf-profile/1", ARCHITECTURE.md): parse -> validate.

#include <nlohmann/json.hpp>
#include <string>

#include "serf/core/profile.h"

namespace serf::io {

inline constexpr const char* kProfileFormat = "serf-profile/1";

// `source` names the document in errors (the file name).
StatusOr<Profile> profile_from_json(const nlohmann::json& doc, const std::string& source);
nlohmann::json profile_to_json(const Profile& profile);

StatusOr<Profile> load_profile(const std::string& path);
Status save_profile(const Profile& profile, const std::string& path);

}  // namespace serf::io
