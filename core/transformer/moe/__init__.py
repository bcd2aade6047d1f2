"""Mixture of experts: the top-k router (router.py); experts, dispatch and the MoE layer follow."""
