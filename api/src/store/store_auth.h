// Challenge-response authentication for the TCP store. The server sends a fresh random
// nonce in HELLO; the client answers HMAC-SHA256(token, nonce || kAuthContext); the server
// recomputes it and compares in constant time. The token itself never crosses the wire,
// and a recorded answer is useless against another connection's nonce. The client sends a
// nonce of its own with the answer and the server replies with
// HMAC-SHA256(token, client_nonce || nonce || kProofContext), so a client holding a token
// only talks to a store that knows it.
//
//   PG_ASSIGN_OR_RETURN(Nonce nonce, make_nonce());                     // server
//   Mac answer = auth_answer(token, nonce);                              // client
//   bool ok = auth_verify(token, nonce, received);                       // server
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "common/status.h"
#include "store/store_protocol.h"

namespace procgroup::detail {

using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

// A nonce from OpenSSL's CSPRNG; PG_ERR_INTERNAL if it cannot be seeded.
Result<Nonce> make_nonce();
// HMAC-SHA256(token, nonce || kAuthContext).
Mac auth_answer(std::string_view token, const Nonce& nonce);
// Constant-time comparison of answer with the expected MAC.
bool auth_verify(std::string_view token, const Nonce& nonce, std::span<const uint8_t> answer);
// The server's proof for a connection: HMAC-SHA256(token, client_nonce || nonce || kProofContext).
Mac server_proof(std::string_view token, std::span<const uint8_t> client_nonce, const Nonce& nonce);
// Constant-time check of a server's proof (client side).
bool proof_verify(std::string_view token, const Nonce& client_nonce, const Nonce& nonce,
                  std::span<const uint8_t> proof);

}  // namespace procgroup::detail
