output "hash_functions" {
  value = {
    base64sha256 = base64sha256("stackd")
    base64sha512 = base64sha512("stackd")
    md5          = md5("stackd")
    sha1         = sha1("stackd")
    sha256       = sha256("stackd")
    sha512       = sha512("stackd")
    uuidv5_dns   = uuidv5("dns", "stackd.example.com")
    uuidv5_url   = uuidv5("url", "https://example.com/stackd")
  }
}
