#pragma once
// The PrivateUse1 boxed fallback's policy is the runtime's. Without a handler
// it tells the user that compute ops need openreg-eager; openreg-eager
// installs its generic kernel here.
#include "openreg/lazy/fallback.h"

namespace openreg::glue {

using lazy::FallbackFn;
void set_fallback_handler(FallbackFn fn);

}  // namespace openreg::glue
