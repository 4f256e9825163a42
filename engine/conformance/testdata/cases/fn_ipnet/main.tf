output "ip_network_functions" {
  value = {
    cidrhost     = cidrhost("10.12.0.0/16", 5)
    cidrhost_neg = cidrhost("10.12.0.0/16", -2)
    cidrhost_v6  = cidrhost("fd00:fd12:3456:7890::/56", 34)
    cidrnetmask  = cidrnetmask("172.16.0.0/12")
    cidrsubnet   = cidrsubnet("10.1.0.0/16", 8, 2)
    cidrsubnet6  = cidrsubnet("fd00:fd12:3456:7890::/56", 16, 162)
    cidrsubnets  = cidrsubnets("10.1.0.0/16", 4, 4, 8, 4)
  }
}
