"""The built-in plugins' code fingerprints at git 7f84c80, whose units were published then:
class -> (fingerprint under the previous rule, the source files hashed as text;
fingerprint of the same code under this rule).  Written by
``python scripts/published_fingerprints.py write``; read by
:func:`mtlbench.provenance.previous_fingerprints`."""

PUBLISHED: dict[str, tuple[str, str]] = {
    "mtlbench_datasets.landmine.Landmine": ("cdb11338944c35fe", "c6de8f3d6262ffcc"),
    "mtlbench_datasets.lenk.Lenk": ("cad03c3a83cd6dd8", "6f5c157c457f518d"),
    "mtlbench_datasets.movielens.MovieLens": ("508f37b3b2c26c4c", "84ce4a52969b6d54"),
    "mtlbench_datasets.personalized.PersonalizedAttributes":
        ("a25ff473ae648f03", "43c20a134789de9e"),
    "mtlbench_datasets.personalized.SUN": ("a25ff473ae648f03", "43c20a134789de9e"),
    "mtlbench_datasets.personalized.Shoes": ("a25ff473ae648f03", "43c20a134789de9e"),
    "mtlbench_datasets.school.School": ("e89cb4d00411c6f2", "4e7cac105b7b754b"),
    "mtlbench_datasets.simulated.Simulated": ("5f96777e51b9f40e", "82bfc52cbcfa65e4"),
    "mtlbench_datasets.synthetic_attributes.SyntheticAttributes":
        ("63fc20e85cfb4770", "61a59b3b2360394d"),
    "mtlbench_models.amtl.AMTL": ("d7587396d861813f", "b2fddf7509185f68"),
    "mtlbench_models.cocmtl.CoCMTL": ("320c3b0c6e83d0f6", "0f0019c9e67fdb1f"),
    "mtlbench_models.lasso.LASSO": ("64b078244ad1257f", "5d9d2cc379debd26"),
    "mtlbench_models.nc_cmtl.NCCMTL": ("21e3a78231ac3fc7", "2fc20acf8419f8bd"),
    "mtlbench_models.ramusa.RAMUSA": ("b13f7bcdb31ddba7", "09b116b15f04117e"),
    "mtlbench_models.rmtfl.RMTFL": ("cd1c87c5630a4efb", "6fd6860682235d07"),
    "mtlbench_models.stl.STL": ("c40d1315a523771d", "1591b3c60b7ce2ed"),
    "mtlbench_models.tfcl.TFCL": ("29d8a8236b8d409d", "8d399da7623d391e"),
    "mtlbench_models.tfcl.TFCLNoAUC": ("29d8a8236b8d409d", "8d399da7623d391e"),
    "mtlbench_models.tfcl_q.TFCLCoc": ("c1c4a7eadd9b360e", "e6bff417430dcb04"),
    "mtlbench_models.tfcl_q.TFCLQ": ("c1c4a7eadd9b360e", "e6bff417430dcb04"),
    "mtlbench_models.tfcl_q.TFCLQNoAUC": ("c1c4a7eadd9b360e", "e6bff417430dcb04"),
    "mtlbench_models.tfcl_q.TFCLQNoG": ("c1c4a7eadd9b360e", "e6bff417430dcb04"),
    "mtlbench_models.vstgmtl.VSTGMTL": ("bcfe1abd0de65d2a", "4d0033dd731870a1"),
}
