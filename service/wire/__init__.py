"""Wire formats: every predict body decoded into one ``PredictQuery``, every answer encoded.

==================  ==========================  ================================================
module              decodes                     encodes
==================  ==========================  ================================================
``ours``            our JSON ``{model, X, ...}``  ``PredictResponse`` JSON (``csv_answer``: CSV)
``csv_bodies``      ``text/csv`` (predict, train)  —
``sniff``           which JSON format a body is  —
``mlflow``          MLflow, KServe V1 bodies      ``{"predictions": [...]}``
``v2``              V2 JSON tensors               the V2 response object
``v2_binary``       V2 binary tensor data         V2 answers, JSON or binary
``csv_answer``      —                             ``text/csv`` answers
==================  ==========================  ================================================

Helpers: ``media`` (Content-Type and Accept), ``rows`` (rows and their 422s), ``validation``
(pydantic errors as envelope details), ``simd`` and ``csv_matrix`` (fast numeric readers),
``answer`` (an encoded answer). Pure: nothing here imports the web framework.
"""
