// The domain model the build trained from the shipped rules (common/domain_classifier.h).
//
// Defined in a source the build generates (tools/domain_model/trainer.cpp writes it, run by
// tools/CMakeLists.txt over rules/ whenever a rule file changes); link faultline_domain_model
// to use it. Nothing generated is committed.
#pragma once

#include <string_view>

namespace faultline::common {

// The model's text (DomainClassifier::serialize()), static storage: parse it once where it is used
// (DomainClassifier::parse) and pass the classifier on.
std::string_view builtinDomainModelText();

}  // namespace faultline::common
