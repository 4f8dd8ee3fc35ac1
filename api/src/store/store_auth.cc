#include "store/store_auth.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>

namespace procgroup::detail {

Result<Nonce> make_nonce() {
  Nonce nonce{};
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) {
    return make_error(PG_ERR_INTERNAL, "cannot draw a random store nonce (OpenSSL error {})",
                      ERR_get_error());
  }
  return nonce;
}

namespace {

Mac hmac(std::string_view token, std::span<const uint8_t> message) {
  Mac mac{};
  unsigned int mac_len = 0;
  // HMAC() with SHA-256 cannot fail for in-memory inputs; a NULL result leaves mac zeroed,
  // which never verifies.
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), message.data(),
       message.size(), mac.data(), &mac_len);
  return mac;
}

}  // namespace

Mac auth_answer(std::string_view token, const Nonce& nonce) {
  uint8_t message[kNonceBytes + kAuthContext.size()];
  std::copy(nonce.begin(), nonce.end(), message);
  std::copy(kAuthContext.begin(), kAuthContext.end(), message + kNonceBytes);
  return hmac(token, message);
}

Mac server_proof(std::string_view token, std::span<const uint8_t> client_nonce, const Nonce& nonce) {
  uint8_t message[2 * kNonceBytes + kProofContext.size()] = {};
  std::copy_n(client_nonce.begin(), std::min(client_nonce.size(), kNonceBytes), message);
  std::copy(nonce.begin(), nonce.end(), message + kNonceBytes);
  std::copy(kProofContext.begin(), kProofContext.end(), message + 2 * kNonceBytes);
  return hmac(token, message);
}

bool proof_verify(std::string_view token, const Nonce& client_nonce, const Nonce& nonce,
                  std::span<const uint8_t> proof) {
  if (proof.size() != kMacBytes || token.empty()) return false;
  Mac expected = server_proof(token, client_nonce, nonce);
  return CRYPTO_memcmp(expected.data(), proof.data(), kMacBytes) == 0;
}

bool auth_verify(std::string_view token, const Nonce& nonce, std::span<const uint8_t> answer) {
  if (answer.size() != kMacBytes || token.empty()) return false;
  Mac expected = auth_answer(token, nonce);
  return CRYPTO_memcmp(expected.data(), answer.data(), kMacBytes) == 0;
}

}  // namespace procgroup::detail
