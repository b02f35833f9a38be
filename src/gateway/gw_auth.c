/* gw_auth: see gw_auth.h. */
#include "gw_auth.h"

#include <string.h>
#include <strings.h>

#define GW_AUTH_KEY_MAX 4096

const char *gw_auth_key_problem(const char *key) {
    size_t n = key ? strlen(key) : 0;
    if (n == 0) return "the API key is empty";
    if (n > GW_AUTH_KEY_MAX) return "the API key is longer than 4096 characters";
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)key[i] <= 0x20 || (unsigned char)key[i] >= 0x7f)
            return "the API key may hold only visible ASCII characters (no spaces, tabs or controls)";
    return NULL;
}

int gw_auth_bearer_ok(const char *key, const char *hv, size_t len) {
    if (!hv || len < 7 || strncasecmp(hv, "Bearer ", 7) != 0) return 0;
    size_t i = 7;
    while (i < len && hv[i] == ' ') i++;
    while (len > i && (hv[len - 1] == ' ' || hv[len - 1] == '\t')) len--;
    const char *tok = hv + i;
    const size_t tn = len - i, kn = strlen(key);
    /* every byte of the key is looked at whatever the token holds */
    unsigned diff = tn != kn;
    for (size_t j = 0; j < kn; j++) diff |= (unsigned char)key[j] ^ (unsigned char)(j < tn ? tok[j] : 0);
    return diff == 0;
}
