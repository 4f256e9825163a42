variable "maybe" {
  type    = any
  default = { a = "1" }
}

output "conversion_functions" {
  value = {
    can_yes      = can(var.maybe.a)
    can_no       = can(var.maybe.missing)
    try_first    = try(var.maybe.missing, var.maybe.a, "none")
    try_last     = try(tonumber("x"), "fallback")
    tobool       = tobool("true")
    tolist       = tolist(["a", "b"])
    tomap        = tomap({ a = 1, b = "2" })
    tonumber     = tonumber("42.5")
    toset        = toset(["b", "a", "b"])
    tostring     = tostring(12)
    type_coerce  = [for v in ["1", 2, true] : tostring(v)]
    null_default = var.maybe == null ? "null" : "set"
  }
}
