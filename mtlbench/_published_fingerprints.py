"""The built-in plugins' code fingerprints at git 7f84c80, whose units were published then:
class -> (fingerprint under the previous rule, the source files hashed as text;
fingerprint of the same code under this rule).  Written by
``python scripts/published_fingerprints.py write``; read by
:func:`mtlbench.provenance.previous_fingerprints`."""

PUBLISHED: dict[str, tuple[str, str]] = {
    "mtlbench_datasets.landmine.Landmine": ("cdb11338944c35fe", "9eea58f93bbbba8f"),
    "mtlbench_datasets.lenk.Lenk": ("cad03c3a83cd6dd8", "2b180c17a93403d4"),
    "mtlbench_datasets.movielens.MovieLens": ("508f37b3b2c26c4c", "27b31013fb861c6c"),
    "mtlbench_datasets.personalized.PersonalizedAttributes":
        ("a25ff473ae648f03", "fda680260f495553"),
    "mtlbench_datasets.personalized.SUN": ("a25ff473ae648f03", "fda680260f495553"),
    "mtlbench_datasets.personalized.Shoes": ("a25ff473ae648f03", "fda680260f495553"),
    "mtlbench_datasets.school.School": ("e89cb4d00411c6f2", "6272fc6bc0ceaec9"),
    "mtlbench_datasets.simulated.Simulated": ("5f96777e51b9f40e", "895abdf50c1ce1f9"),
    "mtlbench_datasets.synthetic_attributes.SyntheticAttributes":
        ("63fc20e85cfb4770", "1a256a6b354f370c"),
    "mtlbench_models.amtl.AMTL": ("d7587396d861813f", "b4a2768a51539d84"),
    "mtlbench_models.cocmtl.CoCMTL": ("320c3b0c6e83d0f6", "c9dfb2680958bf88"),
    "mtlbench_models.lasso.LASSO": ("64b078244ad1257f", "172db9c63c810b75"),
    "mtlbench_models.nc_cmtl.NCCMTL": ("21e3a78231ac3fc7", "f904ecdd2755022c"),
    "mtlbench_models.ramusa.RAMUSA": ("b13f7bcdb31ddba7", "f460574bf85f29bd"),
    "mtlbench_models.rmtfl.RMTFL": ("cd1c87c5630a4efb", "33ed64c0fa1d5b6b"),
    "mtlbench_models.stl.STL": ("c40d1315a523771d", "3269980f96eb9f22"),
    "mtlbench_models.tfcl.TFCL": ("29d8a8236b8d409d", "e70855985acb5892"),
    "mtlbench_models.tfcl.TFCLNoAUC": ("29d8a8236b8d409d", "e70855985acb5892"),
    "mtlbench_models.tfcl_q.TFCLCoc": ("c1c4a7eadd9b360e", "884e91b905641db3"),
    "mtlbench_models.tfcl_q.TFCLQ": ("c1c4a7eadd9b360e", "884e91b905641db3"),
    "mtlbench_models.tfcl_q.TFCLQNoAUC": ("c1c4a7eadd9b360e", "884e91b905641db3"),
    "mtlbench_models.tfcl_q.TFCLQNoG": ("c1c4a7eadd9b360e", "884e91b905641db3"),
    "mtlbench_models.vstgmtl.VSTGMTL": ("bcfe1abd0de65d2a", "b40eae02f9b0bb7c"),
}
