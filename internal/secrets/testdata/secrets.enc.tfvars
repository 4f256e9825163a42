{
	"data": "ENC[AES256_GCM,data:GfcWODfTDaMdDCqcCtC0GvKbaR4a6xFmGPnS4z3w99py4DFy3yYKEy7uFE1VcmT/6gMZ3/tt,iv:XRdMv4z0wR19ADZrL36mGPfm7OtXmEVJVsjnJ5W8H8o=,tag:Ra3f8cUgvdOk5JYWCmrC8w==,type:str]",
	"sops": {
		"age": [
			{
				"enc": "-----BEGIN AGE ENCRYPTED FILE-----\nYWdlLWVuY3J5cHRpb24ub3JnL3YxCi0+IFgyNTUxOSBhTzVnTmJ5U3NPRXJTR1R3\nMWg3Mjh1eFpZQUJ1T0ZZVFZMWi9TZWROVlNBCk9XT1lHWjBjSFRodjJYVURvWDVy\nMjVxT0xueUVSelgrdm9vdWwrUGp3NE0KLS0tIEtPd20rRjJSK1VrYnluNmVOUnRG\nRXUvVWNhSGZCcjRZZlZoSzBrUzEvT1UKZa5KiHR/559rg5woCKRXKjgc1Ovom3+0\n/G2T6RGYa279OMmEzuRZEZ47DzETsUgEI02mLL3hzRCdyiWN4CRnvw==\n-----END AGE ENCRYPTED FILE-----\n",
				"recipient": "age1xjczfenvs8lrf6xpnx62p99ryndednc2t8gmv6anpzmuef3mdeyq5s8wqx"
			}
		],
		"lastmodified": "2026-11-24T02:51:31Z",
		"mac": "ENC[AES256_GCM,data:qr/1c/ZouNaBZHKLVIJauMY4Z2X+HSEnp2wG6b7caAMTAA5vMBFODzMpkPDLGyYyfJH3RJViis7jL1wEG6Cpr/tnYgGU/pK07MRKso5eaWinnW/PFLL3Fe/U3ZU9kN5eEoq82a454nUiKLg0SzoexHMsNlbubB5JnUg/oYM0OkQ=,iv:qLavmtA9EZby8l8Eh0bN7HMv0pH9nK3/mPL84CD4ap0=,tag:ZofTBcJJwqo618DUOjkM4Q==,type:str]",
		"version": "3.13.3"
	}
}
