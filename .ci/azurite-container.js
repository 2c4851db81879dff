// Creates a blob container on Azurite, signed with the emulator's well-known
// account key (SharedKey), so the live artefact tests have one to write to.
//
//     node .ci/azurite-container.js http://127.0.0.1:PORT/devstoreaccount1 CONTAINER
//
// Exits 0 when the container was created or already existed.
"use strict";
const crypto = require("crypto");
const http = require("http");

const ACCOUNT = "devstoreaccount1";
const KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const VERSION = "2021-08-06";

const [base, container] = process.argv.slice(2);
if (!base || !container) {
  console.error("usage: azurite-container.js BLOB_URL CONTAINER");
  process.exit(2);
}
const url = new URL(`${base.replace(/\/$/, "")}/${container}?restype=container`);
const date = new Date().toUTCString();
const canonicalHeaders = `x-ms-date:${date}\nx-ms-version:${VERSION}\n`;
const canonicalResource = `/${ACCOUNT}${url.pathname}\nrestype:container`;
// VERB, then eleven standard headers (all empty: Content-Length is empty
// when zero), then the x-ms- headers and the resource.
const toSign = ["PUT", "", "", "", "", "", "", "", "", "", "", ""].join("\n") + "\n" + canonicalHeaders + canonicalResource;
const signature = crypto.createHmac("sha256", Buffer.from(KEY, "base64")).update(toSign, "utf8").digest("base64");
const request = http.request(
  url,
  {
    method: "PUT",
    headers: {
      "x-ms-date": date,
      "x-ms-version": VERSION,
      "Content-Length": 0,
      Authorization: `SharedKey ${ACCOUNT}:${signature}`,
    },
  },
  (response) => {
    let body = "";
    response.on("data", (chunk) => (body += chunk));
    response.on("end", () => {
      if (response.statusCode === 201 || response.statusCode === 409) process.exit(0);
      console.error(`creating container ${container}: HTTP ${response.statusCode}: ${body}`);
      process.exit(1);
    });
  },
);
request.on("error", (error) => {
  console.error(`creating container ${container}: ${error.message}`);
  process.exit(1);
});
request.end();
