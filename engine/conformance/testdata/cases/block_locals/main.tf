locals {
  base     = "shop"
  envs     = ["dev", "stage", "prod"]
  prod     = local.envs[2]
  names    = [for e in local.envs : "${local.base}-${e}"]
  by_env   = { for i, e in local.envs : e => i }
  upper    = { for k, v in local.by_env : upper(k) => v * 10 if v > 0 }
  nested   = [[1, 2], [3], []]
  flat     = flatten(local.nested)
  splat    = [for o in [{ n = "a" }, { n = "b" }] : o][*].n
  grouped  = { for s in ["ax", "ay", "bz"] : substr(s, 0, 1) => s... }
  cond     = length(local.envs) > 2 ? "many" : "few"
  heredoc  = <<-EOT
    name: ${local.base}
    %{for e in local.envs~}
    - ${e}
    %{endfor~}
  EOT
  template = "%{if local.cond == "many"}lots%{else}some%{endif}"
}

resource "terraform_data" "l" {
  input = {
    names    = local.names
    by_env   = local.by_env
    upper    = local.upper
    flat     = local.flat
    splat    = local.splat
    grouped  = local.grouped
    heredoc  = local.heredoc
    template = local.template
    prod     = local.prod
  }
}

output "names" { value = local.names }
